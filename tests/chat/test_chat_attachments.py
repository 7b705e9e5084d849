"""Files attached to chat messages: the text of each format (real tiny files made here), the files that
are refused and why, the upload URL's limits and ownership, and a message sent with files (the model
reads them, the message keeps them)."""
import pytest
from django.test import Client

from chat import attachments as chat_attachments
from chat import file_text
from chat.errors import AttachmentError
from chat.models import Attachment, Message
from chat_testing import chat_socket, db, frames_until_end, next_frame, runtime_set_aside, send
from files_testing import docx_bytes, encrypted_pdf_bytes, pdf_bytes


# --- extraction ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "data", "kind", "text"), [
    ("notes.txt", "첫 줄\r\nsecond line\n".encode(), "text", "첫 줄\nsecond line"),
    ("notes.txt", "\ufeffUTF-8 with a BOM".encode(), "text", "UTF-8 with a BOM"),
    ("회의록.txt", "안녕하세요, 회의록입니다.".encode("cp949"), "text", "안녕하세요, 회의록입니다."),
    ("notes.txt", "UTF-16 text".encode("utf-16"), "text", "UTF-16 text"),
    ("README.MD", b"# Title\n\n- a **list**\n", "markdown", "# Title\n\n- a **list**"),
    ("report.pdf", pdf_bytes("Quarterly report", "Revenue grew (a lot)."), "pdf", "Quarterly report\nRevenue grew (a lot)."),
    ("plan.docx", docx_bytes("Plan", "둘째 문단", table=[["who", "what"], ["kim", "PDF"]]), "docx",
     "Plan\n둘째 문단\nwho | what\nkim | PDF"),
])
def test_the_text_of_each_format(name, data, kind, text):
    assert file_text.extract_text(name, data) == (kind, text)


@pytest.mark.parametrize(("name", "data", "code"), [
    ("empty.txt", b"", "empty_file"),
    ("empty.pdf", b"", "empty_file"),
    ("blank.md", b" \n\t\n", "no_text"),
    ("fake.pdf", b"This is plain text with a .pdf name.", "not_a_pdf"),
    ("fake.pdf", docx_bytes("a Word file named .pdf"), "not_a_pdf"),
    ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog", "not_a_pdf"),
    ("scan.pdf", pdf_bytes(), "no_text"),
    ("locked.pdf", encrypted_pdf_bytes(), "encrypted_pdf"),
    ("fake.docx", b"not a zip at all", "not_a_docx"),
    ("fake.docx", pdf_bytes("a PDF named .docx"), "not_a_docx"),
    ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not_text"),
    ("latin1.txt", "caf\xe9 cr\xe8me \xff".encode("latin-1"), "not_text"),
    ("program.exe", b"MZ\x90\x00", "unsupported_type"),
    ("noextension", b"text", "unsupported_type"),
])
def test_files_that_cannot_be_read_are_refused_saying_why(name, data, code):
    with pytest.raises(AttachmentError) as refused:
        file_text.extract_text(name, data)
    assert refused.value.code == code and name in refused.value.message


def test_the_model_reads_each_file_before_the_message():
    files = [Attachment(name="a.txt", text="alpha"), Attachment(name="b.pdf", text="beta")]
    assert chat_attachments.prompt_content("Compare them.", files) == (
        '<file name="a.txt">\nalpha\n</file>\n\n<file name="b.pdf">\nbeta\n</file>\n\nCompare them.')
    assert chat_attachments.prompt_content("", files[:1]) == '<file name="a.txt">\nalpha\n</file>'


# --- the upload URL ------------------------------------------------------------------------------------
def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _upload(client, conversation_id: int, name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(f"/chat/{conversation_id}/attachments/", {"file": SimpleUploadedFile(name, data)})


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "data"), [
    ("notes.md", "# 회의\n\n결론: PDF와 DOCX를 지원한다.".encode()),
    ("report.pdf", pdf_bytes("Quarterly report", "Revenue grew.")),
    ("plan.docx", docx_bytes("Plan", "Ship attachments.")),
])
def test_an_upload_answers_its_token_count(engine, conversation, member, name, data):
    response = _upload(_client(member), conversation.pk, name, data)
    assert response.status_code == 201, response.content
    body = response.json()
    attachment = Attachment.objects.get(pk=body["id"])
    assert attachment.conversation_id == conversation.pk and attachment.message is None  # a draft
    assert body["num_tokens"] == attachment.num_tokens == engine.count_tokens(
        chat_attachments.prompt_content("", [attachment]))
    assert body["max_tokens"] == chat_attachments.token_budget(engine.max_model_len)
    assert body["size_bytes"] == len(data) and body["name"] == name and body["num_chars"] == len(attachment.text)
    text = _client(member).get(body["url"])
    assert text.status_code == 200 and text.content.decode() == attachment.text


@pytest.mark.django_db
def test_uploads_refused_with_a_clear_error(engine, conversation, member, settings):
    client = _client(member)
    settings.PAGODA_CHAT_MAX_ATTACHMENT_BYTES = 100_000
    huge = _upload(client, conversation.pk, "huge.txt", b"word " * 100_000)  # 500 kB
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "too_large"
    assert "0.1 MB" in huge.json()["error"]["message"]
    over = _upload(client, conversation.pk, "long.txt", ("토큰 " * engine.max_model_len).encode())
    assert over.status_code == 413 and over.json()["error"]["code"] == "context_length_exceeded"
    fake = _upload(client, conversation.pk, "fake.pdf", b"just text")
    assert fake.status_code == 400 and fake.json()["error"] == {
        "code": "not_a_pdf", "message": "'fake.pdf' is not a PDF file."}
    empty = _upload(client, conversation.pk, "empty.docx", b"")
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "empty_file"
    assert _upload(client, conversation.pk, "x.exe", b"MZ").status_code == 415
    missing = client.post(f"/chat/{conversation.pk}/attachments/", {})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "no_file"
    assert not Attachment.objects.exists()  # nothing kept of a refused file


@pytest.mark.django_db
def test_an_upload_while_the_model_is_not_loaded_is_a_503(conversation, member):
    with runtime_set_aside():
        response = _upload(_client(member), conversation.pk, "a.txt", b"hello")
    assert response.status_code == 503 and response.json()["error"]["code"] == "engine_unavailable"


@pytest.mark.django_db
def test_nothing_of_another_users_attachments_is_reachable(engine, tenant, conversation, member, make_user):
    other = make_user("other", tenant)
    mine = _upload(_client(member), conversation.pk, "mine.txt", b"private").json()
    theirs = _client(other)
    assert _upload(theirs, conversation.pk, "x.txt", b"x").status_code == 404  # not their conversation
    assert theirs.get(mine["url"]).status_code == 404
    assert theirs.post(f"/chat/attachments/{mine['id']}/delete/").status_code == 404
    assert Attachment.objects.filter(pk=mine["id"]).exists()
    assert _client(member).post(f"/chat/attachments/{mine['id']}/delete/").status_code == 204
    assert not Attachment.objects.filter(pk=mine["id"]).exists()


# --- sending files ---------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_message_with_files_gives_their_text_to_the_model_and_keeps_them(engine, conversation, member,
                                                                                session_key):
    client = await db(_client)(member)
    pdf = (await db(_upload)(client, conversation.pk, "report.pdf", pdf_bytes("Revenue grew ten percent."))).json()
    notes = (await db(_upload)(client, conversation.pk, "notes.docx", docx_bytes("Costs fell."))).json()
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Summarise.", "attachments": [pdf["id"], notes["id"]]})
        frames = await frames_until_end(communicator)
        await send(communicator, {"type": "user_message", "content": "Again.", "attachments": [pdf["id"]]})
        resent = await next_frame(communicator)
    start, done = frames[0], frames[-1]
    assert done["type"] == "done"
    assert [a["name"] for a in start["attachments"]] == ["report.pdf", "notes.docx"]
    expected = engine.encode_chat([{"role": "user", "content": (
        '<file name="report.pdf">\nRevenue grew ten percent.\n</file>\n\n'
        '<file name="notes.docx">\nCosts fell.\n</file>\n\nSummarise.')}])
    assert done["usage"]["prompt_tokens"] == len(expected)
    assert resent["type"] == "error" and resent["code"] == "unknown_attachment"  # sent already

    @db
    def kept():
        message = Message.objects.get(pk=start["user_message_id"])
        return message.content, [a.name for a in message.attachments.all()]

    assert await kept() == ("Summarise.", ["report.pdf", "notes.docx"])
    page = (await db(client.get)(f"/chat/{conversation.pk}/")).content.decode()
    assert "report.pdf" in page and f"/chat/attachments/{pdf['id']}/" in page


@pytest.mark.django_db(transaction=True)
async def test_files_alone_make_a_message_and_name_the_conversation(engine, conversation, member, session_key):
    client = await db(_client)(member)
    draft = (await db(_upload)(client, conversation.pk, "메모.txt", "내일 회의".encode())).json()
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "", "attachments": [draft["id"]]})
        frames = await frames_until_end(communicator)
        await send(communicator, {"type": "user_message", "content": ""})
        empty = await next_frame(communicator)
    assert frames[0]["title"] == "메모.txt" and frames[-1]["type"] == "done"
    assert empty["code"] == "empty_message"  # no files, no text


@pytest.mark.django_db
def test_exports_carry_the_attachments(conversation, member):
    from chat import history

    message = history.add_user_message(conversation, "See the file.")
    Attachment.objects.create(conversation=conversation, message=message, name="표.docx", kind="docx", size_bytes=9,
                              text="the file's text", num_tokens=4)
    client = _client(member)
    markdown = client.get(f"/chat/{conversation.pk}/export.md").content.decode()
    assert "> See the file.\n\nAttached: 표.docx (4 tokens)" in markdown
    exported = client.get(f"/chat/{conversation.pk}/export.json").json()
    (sent,) = exported["conversations"][0]["messages"]
    assert sent["attachments"] == [{"name": "표.docx", "kind": "docx", "size_bytes": 9, "num_tokens": 4,
                                    "text": "the file's text"}]
