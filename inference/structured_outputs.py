"""StructuredOutputsParams: vLLM's structured-output options, checked before a request is queued.

Exactly one constraint per request: `json` (a JSON schema, as a dict or its text), `regex`, `choice`
(the output is one of these strings), `grammar` (xgrammar's EBNF, `root ::= ...`, or a Lark grammar)
or `json_object=True` (any JSON object). `disable_any_whitespace` makes JSON compact (no free
whitespace between tokens); `disable_additional_properties` is what the engine does anyway (an
object takes only the properties its schema names, unless the schema says otherwise).
`whitespace_pattern` and `structural_tag` are vLLM options of other backends: refused.

`to_grammar()` turns the constraint into an xgrammar Grammar without a tokenizer (cheap): a frontend
calls it to refuse a bad schema, regex or grammar before anything is queued, and the engine compiles
it for its vocabulary (`inference/grammar.py`).
"""
from __future__ import annotations

import json as json_module
import re
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequestError

CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
FIELD = "structured_outputs"
# xgrammar's C++ errors start with "[hh:mm:ss] /path/file.cc:123: " and sometimes a failed check.
_CPP_PREFIX = re.compile(r"^\s*\[[\d:]+\] \S+:\d+: (Check failed: \(.*?\) is false: )?")


@dataclass
class StructuredOutputsParams:
    """One output constraint (vLLM's fields); see the module docstring."""

    json: str | dict | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None

    def __post_init__(self) -> None:
        given = [name for name in CONSTRAINTS if getattr(self, name) not in (None, False)]
        if len(given) != 1:
            raise InvalidRequestError(
                "structured_outputs takes exactly one of json, regex, choice, grammar, json_object"
                + (f"; got {', '.join(given)}" if given else "; got none"), field=FIELD)
        if self.structural_tag is not None:
            raise InvalidRequestError("structured_outputs.structural_tag is not supported; use json, regex, "
                                      "choice or grammar", field=FIELD)
        if self.whitespace_pattern is not None:
            raise InvalidRequestError("structured_outputs.whitespace_pattern is not supported by the grammar "
                                      "engine (xgrammar); disable_any_whitespace=True gives compact JSON", field=FIELD)
        if self.json is not None and not isinstance(self.json, (str, dict)):
            raise InvalidRequestError("structured_outputs.json must be a JSON schema (an object or its text)",
                                      field=FIELD)
        if self.regex is not None and (not isinstance(self.regex, str) or not self.regex):
            raise InvalidRequestError("structured_outputs.regex must be a non-empty string", field=FIELD)
        if self.grammar is not None and (not isinstance(self.grammar, str) or not self.grammar.strip()):
            raise InvalidRequestError("structured_outputs.grammar must be a non-empty string", field=FIELD)
        if self.choice is not None and (not isinstance(self.choice, list) or not self.choice or not all(
                isinstance(c, str) and c for c in self.choice)):
            raise InvalidRequestError("structured_outputs.choice must be a non-empty list of non-empty strings",
                                      field=FIELD)
        if self.json_object not in (None, True, False):
            raise InvalidRequestError("structured_outputs.json_object must be true or false", field=FIELD)
        for name in ("disable_any_whitespace", "disable_additional_properties"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidRequestError(f"structured_outputs.{name} must be true or false", field=FIELD)

    @classmethod
    def from_value(cls, value: "StructuredOutputsParams | dict") -> "StructuredOutputsParams":
        """The params from themselves or from a dict of their fields (a JSON body's)."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise InvalidRequestError("structured_outputs must be an object of vLLM's fields (json, regex, "
                                      "choice, grammar, json_object, ...)", field=FIELD)
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidRequestError(f"structured_outputs does not take {', '.join(unknown)}", field=FIELD)
        return cls(**value)

    @property
    def kind(self) -> str:
        return next(name for name in CONSTRAINTS if getattr(self, name) not in (None, False))

    def key(self) -> tuple:
        """What identifies the compiled grammar: equal keys, equal grammars (the engine's cache key)."""
        kind = self.kind
        value: Any = getattr(self, kind)
        if kind == "json":
            value = _schema_text(value)
        elif kind == "choice":
            value = tuple(value)
        return kind, value, self.disable_any_whitespace

    def to_grammar(self):
        """The constraint as an xgrammar Grammar. Raises InvalidRequestError naming what is wrong."""
        import xgrammar as xgr

        kind = self.kind
        compact = self.disable_any_whitespace
        try:
            if kind == "json":
                return xgr.Grammar.from_json_schema(_schema_text(self.json), any_whitespace=not compact)
            if kind == "json_object":
                # Any JSON object (OpenAI's JSON mode): an object schema that allows every property.
                return xgr.Grammar.from_json_schema('{"type": "object"}', any_whitespace=not compact,
                                                    strict_mode=False)
            if kind == "regex":
                return xgr.Grammar.from_regex(self.regex)
            if kind == "choice":
                # JSON's string escapes are EBNF's: each choice is one quoted literal.
                return xgr.Grammar.from_ebnf("root ::= " + " | ".join(json_module.dumps(c) for c in self.choice))
            if "::=" in self.grammar:
                return xgr.Grammar.from_ebnf(self.grammar)
            return xgr.Grammar.from_lark(self.grammar)
        except (RuntimeError, ValueError, TypeError) as e:
            what = {"json": "JSON schema", "json_object": "JSON schema", "regex": "regex", "choice": "choice",
                    "grammar": "grammar"}[kind]
            raise InvalidRequestError(f"invalid {what} in structured_outputs.{kind}: {clean_error(e)}",
                                      field=FIELD) from None


def _schema_text(schema: str | dict) -> str:
    if isinstance(schema, str):
        return schema
    try:
        return json_module.dumps(schema, ensure_ascii=False)  # property order matters: it is the output's
    except (TypeError, ValueError) as e:
        raise InvalidRequestError(f"structured_outputs.json is not JSON: {e}", field=FIELD) from None


def clean_error(e: BaseException) -> str:
    """xgrammar's error message without its C++ file and line, on one line."""
    text = _CPP_PREFIX.sub("", str(e)).strip()
    return " ".join(text.split())[:500] or type(e).__name__
