"""The /v1 endpoints (django-ninja, async): parse, call api.completions, render. Schema: /v1/openapi.json.

`root_api` serves /tokenize and /detokenize at the server root too, where vLLM serves them.
"""
from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

import engine_runtime
from api import completions, profiles, tokenization
from api.auth import ApiKeyAuth
from api.calls import ApiCall
from api.errors import ApiError, error_response, invalid, param_from_loc, to_api_error
from api.parsing import TextJsonParser
from api.schemas import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Completion,
    CompletionRequest,
    DetokenizeRequest,
    DetokenizeResponse,
    ErrorResponse,
    Model,
    ModelList,
    TokenizeRequest,
    TokenizeResponse,
)
from pagoda.db import db_call

logger = logging.getLogger(__name__)

ERRORS = {code: ErrorResponse for code in (400, 401, 403, 404, 429, 500, 503)}

def _sse_response(schema_name: str) -> dict:
    """openapi_extra for an endpoint that also answers `text/event-stream` with events of `schema_name`."""
    return {"responses": {200: {"content": {"text/event-stream": {
        "schema": {"$ref": f"#/components/schemas/{schema_name}"}}}}}}


class PagodaAPI(NinjaAPI):
    def get_openapi_schema(self, *args, **kwargs):
        """ninja's schema, plus the stream chunk schema (used only in the text/event-stream answers)."""
        schema = super().get_openapi_schema(*args, **kwargs)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        chunk = ChatCompletionChunk.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in chunk.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components["ChatCompletionChunk"] = chunk
        return schema


def _configure(target: NinjaAPI) -> NinjaAPI:
    """Map every error of `target`'s endpoints to OpenAI's error shape."""

    @target.exception_handler(ApiError)
    def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        return error_response(exc)

    @target.exception_handler(ValidationError)
    def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        first = exc.errors[0] if exc.errors else {}
        param = param_from_loc(first.get("loc", ()))
        # A union (prompt: text, texts or token ids) fails once per member: say what each wanted.
        messages = dict.fromkeys(e.get("msg", "") for e in exc.errors
                                 if param_from_loc(e.get("loc", ())) == param and e.get("msg"))
        message = "; or ".join(messages) or "Invalid request."
        return error_response(invalid(f"{param}: {message}" if param else message, param))

    @target.exception_handler(AuthenticationError)
    def _authentication_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return error_response(ApiError(401, "Incorrect API key provided.", code="invalid_api_key"))

    @target.exception_handler(HttpError)
    def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:  # e.g. a body that is not JSON
        return error_response(ApiError(exc.status_code, str(exc)))

    @target.exception_handler(Exception)
    def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
        if isinstance(exc, DatabaseError):  # e.g. while authenticating the key: a 503, not a bug
            logger.error("database error in %s %s: %s", request.method, request.path, exc)
            return error_response(to_api_error(exc))
        if isinstance(exc, RequestDataTooBig):  # read while parsing the body: 413
            return error_response(to_api_error(exc))
        logger.exception("unexpected error in %s %s", request.method, request.path)
        return error_response(ApiError(500, "Internal server error.", type="server_error", code="internal_error"))

    return target


api = _configure(PagodaAPI(
    title="Pagoda API",
    version="1",
    description=(
        "OpenAI-compatible API of Pagoda's engine. Authenticate with `Authorization: Bearer <key>` (a "
        "tenant's API key). `model` is one of your tenant's sampling profiles (GET /v1/models) or the "
        "model id (your default profile). Your tenant's system prompt is always applied first. "
        "With `stream: true` the answer is Server-Sent Events (`text/event-stream`) of chunks, ending "
        "with `data: [DONE]`."
    ),
    urls_namespace="api",
    openapi_url="/openapi.json",
    docs_url="/docs",
    auth=ApiKeyAuth(),
    parser=TextJsonParser(),
))
root_api = _configure(NinjaAPI(title="Pagoda tokenizer", version="1", urls_namespace="api-root",
                               openapi_url=None, docs_url=None, auth=ApiKeyAuth(), parser=TextJsonParser()))


@api.post("/chat/completions", response={200: ChatCompletion, **ERRORS}, tags=["completions"],
          summary="Create a chat completion",
          openapi_extra=_sse_response("ChatCompletionChunk"))
async def create_chat_completion(request: HttpRequest, body: ChatCompletionRequest):
    return await completions.chat_completion(request.auth, body)


@api.post("/completions", response={200: Completion, **ERRORS}, tags=["completions"],
          summary="Create a completion (raw text after the tenant's system prompt)",
          openapi_extra=_sse_response("Completion"))
async def create_completion(request: HttpRequest, body: CompletionRequest):
    return await completions.text_completion(request.auth, body)


async def _models(request: HttpRequest) -> list[dict]:
    key = request.auth
    models = await db_call(profiles.list_models)(key.tenant, engine_runtime.status()["max_model_len"])
    await ApiCall(key, "models").finish()
    return models


@api.get("/models", response={200: ModelList, **ERRORS}, tags=["models"],
         summary="List the models: the model id and your tenant's sampling profiles")
async def list_models(request: HttpRequest):
    return JsonResponse({"object": "list", "data": await _models(request)})


@api.get("/models/{model}", response={200: Model, **ERRORS}, tags=["models"], summary="Retrieve one model")
async def retrieve_model(request: HttpRequest, model: str):
    for entry in await _models(request):
        if entry["id"] == model:
            return JsonResponse(entry)
    return error_response(ApiError(404, f"The model `{model}` does not exist or you do not have access to it.",
                                   param="model", code="model_not_found"))


async def tokenize(request: HttpRequest, body: TokenizeRequest):
    return await tokenization.tokenize(request.auth, body)


async def detokenize(request: HttpRequest, body: DetokenizeRequest):
    return await tokenization.detokenize(request.auth, body)


for _target in (api, root_api):  # vLLM serves these at the root; /v1 has them too, beside the rest
    _target.post("/tokenize", response={200: TokenizeResponse, **ERRORS}, tags=["tokenizer"],
                 summary="Tokenize a prompt or messages (the tenant's system prompt first)")(tokenize)
    _target.post("/detokenize", response={200: DetokenizeResponse, **ERRORS}, tags=["tokenizer"],
                 summary="Turn token ids into text")(detokenize)


def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    """Any other /v1 path: a 404 in OpenAI's shape rather than Django's HTML page."""
    return error_response(ApiError(404, f"Unknown API route: {request.method} {request.path}", code="unknown_url"))
