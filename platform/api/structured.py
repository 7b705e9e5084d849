"""Structured outputs in /v1: a request's output constraint as the engine's StructuredOutputsParams.

    response_format {"type": "text"}                          no constraint
    response_format {"type": "json_object"}                   any JSON object (OpenAI's JSON mode)
    response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}
                                                              the schema (always enforced, strict or not)
    structured_outputs {json | regex | choice | grammar | json_object, ...}   vLLM's extra field
    guided_json / guided_regex / guided_choice / guided_grammar              vLLM's older extra fields

At most one of them per request. A bad one (an unknown type, a schema the grammar engine cannot
take, a regex that does not parse) is a 400 naming the field, before anything reaches the engine.
"""
from __future__ import annotations

import re

from api.errors import invalid
from api.schemas import SamplingFields
from inference import StructuredOutputsParams
from inference.errors import InvalidRequestError

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for json_schema.name
_GUIDED = {"guided_json": "json", "guided_regex": "regex", "guided_choice": "choice", "guided_grammar": "grammar"}


def structured_outputs_of(body: SamplingFields) -> StructuredOutputsParams | None:
    """The request's constraint (None without one); raises ApiError (400) for a bad or doubled one."""
    sources: list[tuple[str, StructuredOutputsParams]] = []
    response_format = getattr(body, "response_format", None)
    if response_format is not None:
        params = _from_response_format(response_format)
        if params is not None:
            sources.append(("response_format", params))
    if body.structured_outputs is not None:
        sources.append(("structured_outputs", _build("structured_outputs", body.structured_outputs)))
    for name, kind in _GUIDED.items():
        value = getattr(body, name)
        if value is not None:
            sources.append((name, _build(name, {kind: value})))
    if len(sources) > 1:
        raise invalid(f"Give one output constraint, not {' and '.join(name for name, _ in sources)}.",
                      sources[1][0], code="invalid_value")
    if not sources:
        return None
    param, params = sources[0]
    _check(param, params)
    return params


def _from_response_format(value: dict) -> StructuredOutputsParams | None:
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return StructuredOutputsParams(json_object=True)
    if kind != "json_schema":
        raise invalid("response_format.type must be one of text, json_object, json_schema.",
                      "response_format.type", code="invalid_value")
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise invalid("response_format.json_schema must be an object with `name` and `schema`.",
                      "response_format.json_schema", code="invalid_value")
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        raise invalid("response_format.json_schema.name must be 1 to 64 letters, digits, _ or -.",
                      "response_format.json_schema.name", code="invalid_value")
    if not isinstance(spec.get("strict", False), (bool, type(None))):
        raise invalid("response_format.json_schema.strict must be true or false.",
                      "response_format.json_schema.strict", code="invalid_value")
    schema = spec.get("schema", {"type": "object"})
    if not isinstance(schema, dict):
        raise invalid("response_format.json_schema.schema must be a JSON schema object.",
                      "response_format.json_schema.schema", code="invalid_value")
    return StructuredOutputsParams(json=schema)


def _build(param: str, fields: dict) -> StructuredOutputsParams:
    try:
        return StructuredOutputsParams.from_value(fields)
    except InvalidRequestError as e:
        raise invalid(_renamed(str(e), param), param, code="invalid_value") from None


def _check(param: str, params: StructuredOutputsParams) -> None:
    """Compile-free check of the constraint (xgrammar parses it): the engine would refuse it anyway,
    but here the message names the request's own field."""
    try:
        params.to_grammar()
    except InvalidRequestError as e:
        where = "response_format.json_schema.schema" if param == "response_format" else param
        raise invalid(_renamed(str(e), where), where, code="invalid_value") from None


def _renamed(message: str, param: str) -> str:
    """The engine's message with its field (structured_outputs.json, ...) named as the request named it."""
    if param.startswith("guided_") or param.startswith("response_format"):
        return re.sub(r"structured_outputs(\.\w+)?", param, message)
    return message
