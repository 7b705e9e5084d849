"""The text of a file attached to a chat message: plain text, Markdown, PDF (pypdf) and DOCX
(python-docx). Pure functions of the file's name and bytes; nothing is stored here.

    kind, text = extract_text("report.pdf", data)   # AttachmentError for anything it cannot read

The kind comes from the name's extension, and the bytes must agree with it: a ".pdf" that is not a
PDF is refused, never guessed at. A file with no text (an empty file, a scanned PDF) is refused too.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import PurePath

from chat.errors import AttachmentError

KINDS_BY_EXTENSION = {".txt": "text", ".text": "text", ".log": "text", ".csv": "text",
                      ".md": "markdown", ".markdown": "markdown", ".pdf": "pdf", ".docx": "docx"}
# A DOCX is a zip: its document part, unpacked, may be far larger than the upload (a zip bomb).
MAX_DOCX_XML_BYTES = 64_000_000
# Text files from Korean Windows machines are often CP949 (EUC-KR's superset), not UTF-8.
_TEXT_ENCODINGS = ("utf-8", "cp949")


def kind_of(name: str) -> str:
    """The attachment kind the file name's extension says; AttachmentError for any other file."""
    kind = KINDS_BY_EXTENSION.get(PurePath(name).suffix.lower())
    if kind is None:
        raise AttachmentError("unsupported_type", f"{name!r} is not a file that can be attached: plain text (.txt), "
                              "Markdown (.md), PDF (.pdf) or Word (.docx).", status=415)
    return kind


def extract_text(name: str, data: bytes) -> tuple[str, str]:
    """(kind, text) of the file `name` holding `data`. Raises AttachmentError (empty_file, not_text,
    not_a_pdf, encrypted_pdf, not_a_docx, no_text, unsupported_type)."""
    kind = kind_of(name)
    if not data:
        raise AttachmentError("empty_file", f"{name!r} is empty.")
    text = {"text": _plain, "markdown": _plain, "pdf": _pdf, "docx": _docx}[kind](name, data)
    text = text.replace("\x00", "").replace("\r\n", "\n").strip()
    if not text:
        raise AttachmentError("no_text", f"{name!r} holds no text that could be read"
                              + (" (a scanned PDF has only images)." if kind == "pdf" else "."))
    return kind, text


def _plain(name: str, data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return _decode(name, data, ("utf-16",))
    if b"\x00" in data[:8192]:
        raise AttachmentError("not_text", f"{name!r} is not a text file (it holds binary data).")
    return _decode(name, data.removeprefix(b"\xef\xbb\xbf"), _TEXT_ENCODINGS)


def _decode(name: str, data: bytes, encodings: tuple[str, ...]) -> str:
    for encoding in encodings:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise AttachmentError("not_text", f"{name!r} is not text in UTF-8 (or CP949); save it as UTF-8 and attach it again.")


def _pdf(name: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    if b"%PDF-" not in data[:1024]:  # where the format puts its header
        raise AttachmentError("not_a_pdf", f"{name!r} is not a PDF file.")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentError("encrypted_pdf", f"{name!r} is protected by a password; attach an unprotected copy.")
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
    except AttachmentError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as error:
        raise AttachmentError("not_a_pdf", f"{name!r} is not a readable PDF ({error.__class__.__name__}).") from None


def _docx(name: str, data: bytes) -> str:
    import docx

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            part = archive.getinfo("word/document.xml")
    except (zipfile.BadZipFile, KeyError):
        raise AttachmentError("not_a_docx", f"{name!r} is not a Word (.docx) document.") from None
    if part.file_size > MAX_DOCX_XML_BYTES:
        raise AttachmentError("too_large", f"{name!r} unpacks to more text than can be attached.", status=413)
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as error:  # noqa: BLE001 - python-docx raises many kinds for a broken package
        raise AttachmentError("not_a_docx", f"{name!r} is not a readable Word document ({error.__class__.__name__}).") \
            from None
    blocks = [p.text for p in document.paragraphs]
    for table in document.tables:  # after the paragraphs: python-docx keeps the two apart
        blocks.extend(" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows)
    return "\n".join(blocks)
