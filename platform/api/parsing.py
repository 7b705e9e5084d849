"""The /v1 request-body parser: JSON whose strings are Unicode text.

JSON may carry a lone surrogate escape ("\\ud800"): Python's json module accepts it, but the result is
not text that can be encoded or tokenized (the tokenizer raises TypeError: a 500). Such a body is
refused like any unparseable one (400 "Cannot parse request body", from django-ninja).
"""
from __future__ import annotations

import json

from django.http import HttpRequest
from ninja.parser import Parser


class TextJsonParser(Parser):
    def parse_body(self, request: HttpRequest):
        data = json.loads(request.body)
        # Encoding the whole document raises UnicodeEncodeError for a surrogate in any key or value.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
        return data
