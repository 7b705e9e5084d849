"""Request and response bodies of /v1, as OpenAI defines them (the subset Pagoda serves), for
validation and the OpenAPI schema.

Requests check types strictly, as OpenAI does: no "10" for an integer, no `true` for a number, no
Infinity or NaN (a plain pydantic model in strict mode; ninja's Schema would coerce). Value ranges are
the engine's SamplingParams' to judge (one authority), and a bad value comes back as a 400 naming the
field. Fields left out (None) take the value of the sampling profile the `model` names. Unknown fields
are ignored, as OpenAI and vLLM do; fields that would change the answer in ways Pagoda does not
implement (response_format, best_of, ...) are refused.
"""
from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field


# --- requests ---
class RequestModel(BaseModel):
    """Strict JSON types: an int is a number, but a bool or a string is neither; floats are finite."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")


class StreamOptions(RequestModel):
    include_usage: bool = Field(False, description="Send a last chunk with `usage` (and empty `choices`).")


class FunctionCall(RequestModel):
    name: str
    arguments: str = Field(description="The arguments as JSON text (an object), as the model generated them.")


class MessageToolCall(RequestModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(RequestModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = Field(
        None, description='Text, or a list of parts of which only {"type": "text", "text": ...} is supported; '
                          "null in an assistant message with tool_calls.")
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = Field(None, description="An assistant message's calls.")
    tool_call_id: str | None = Field(None, description="A tool message: the id of the call it answers.")


class FunctionDefinition(RequestModel):
    name: str = Field(description="Letters, digits, _ and -, at most 64 characters.")
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="A JSON schema of the arguments (an object).")
    strict: bool | None = Field(None, description="Accepted; calls are held to the schema only under "
                                                  "tool_choice required or a named function.")


class Tool(RequestModel):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(RequestModel):
    name: str


class NamedToolChoice(RequestModel):
    type: Literal["function"]
    function: NamedFunction


class SamplingFields(RequestModel):
    """Fields shared by both completion endpoints; each overrides the profile's value when given."""

    model: str = Field(description="A sampling profile of your tenant (see GET /v1/models), or the model id "
                                   "for your tenant's default profile.")
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, description=">= 1; prompt plus max_tokens must fit in max_model_len.")
    temperature: float | None = Field(None, description=">= 0; 0 is greedy.")
    top_p: float | None = Field(None, description="In (0, 1].")
    stop: str | list[str] | None = Field(None, description="Stop strings; they are not included in the text.")
    seed: int | None = None
    presence_penalty: float | None = Field(None, description="In [-2, 2].")
    frequency_penalty: float | None = Field(None, description="In [-2, 2].")
    n: int | None = Field(None, description="Choices to generate, in [1, 128]; each is one engine request.")
    user: str | None = None
    # vLLM's extra sampling fields (the openai client sends them through `extra_body`)
    top_k: int | None = Field(None, description="vLLM extra: 0 or -1 disables.")
    min_p: float | None = Field(None, description="vLLM extra: in [0, 1].")
    repetition_penalty: float | None = Field(None, description="vLLM extra: > 0; 1 is off.")
    min_tokens: int | None = Field(None, description="vLLM extra: >= 0, <= max_tokens.")
    ignore_eos: bool | None = Field(None, description="vLLM extra: keep generating past end-of-sequence.")
    logit_bias: dict[str, float] | None = Field(
        None, description="Token id (as a string) -> bias in [-100, 100], added to its logit before sampling.")
    stop_token_ids: list[int] | None = Field(None, description="vLLM extra: token ids that end the completion.")
    include_stop_str_in_output: bool | None = Field(None, description="vLLM extra: keep the stop string.")
    skip_special_tokens: bool | None = Field(None, description="vLLM extra: leave special tokens out of the text.")
    bad_words: list[str] | None = Field(None, description="vLLM extra: words never generated.")
    allowed_token_ids: list[int] | None = Field(None, description="vLLM extra: sample only these token ids.")
    # vLLM's structured outputs (api.structured; at most one constraint per request)
    structured_outputs: dict[str, Any] | None = Field(
        None, description="vLLM extra: one of json (a JSON schema), regex, choice, grammar (EBNF or Lark), "
                          "json_object; with disable_any_whitespace.")
    guided_json: dict[str, Any] | str | None = Field(None, description="vLLM extra (older name): a JSON schema.")
    guided_regex: str | None = Field(None, description="vLLM extra (older name): a regex the output matches.")
    guided_choice: list[str] | None = Field(None, description="vLLM extra (older name): the output is one of these.")
    guided_grammar: str | None = Field(None, description="vLLM extra (older name): an EBNF or Lark grammar.")


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, description="The newer name of max_tokens (wins if both).")
    logprobs: bool | None = Field(None, description="Return the log-probability of each output token.")
    top_logprobs: int | None = Field(None, description="In [0, 20]: alternatives per token (needs logprobs).")
    tools: list[Tool] | None = Field(None, description="Functions the model may call (see docs/API.md).")
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        None, description='"auto" (the default with tools), "none", "required", or '
                          '{"type": "function", "function": {"name": ...}}; the last two are grammar-constrained.')
    parallel_tool_calls: bool | None = Field(None, description="Allow several calls in one answer (default true).")
    functions: list[Any] | None = Field(None, description="Refused: the deprecated form of tools.")
    function_call: Any = Field(None, description="Refused: the deprecated form of tool_choice.")
    response_format: dict[str, Any] | None = None
    prompt_logprobs: int | None = Field(None, description="vLLM extra, in [0, 20]: the prompt tokens' "
                                                          "log-probabilities (top-level `prompt_logprobs`); "
                                                          "not with stream.")


class CompletionRequest(SamplingFields):
    prompt: str | list[str] | list[int] = Field(description="Text, a list of one text, or token ids.")
    logprobs: int | None = Field(None, description="In [0, 20]: log-probabilities of the k likeliest tokens.")
    echo: bool | None = Field(None, description="Put the prompt (your text, without the tenant's system "
                                                "prompt) before each choice's text; with logprobs, its tokens "
                                                "are scored too; with max_tokens 0, only the prompt comes back.")
    best_of: int | None = Field(None, description="Refused unless 1: use n.")
    suffix: str | None = Field(None, description="Refused (no fill-in-the-middle).")
    prompt_logprobs: int | None = Field(None, description="vLLM extra, in [0, 20]: the prompt tokens' "
                                                          "log-probabilities (`choices[i].prompt_logprobs`); "
                                                          "not with stream.")


class TokenizeRequest(RequestModel):
    """vLLM's /tokenize: `prompt` (as /v1/completions reads it) or `messages` (as chat renders them)."""

    model: str | None = Field(None, description="Optional: checked like the completions' `model`.")
    prompt: str | list[int] | None = None
    messages: list[ChatMessage] | None = None
    tools: list[Tool] | None = Field(None, description="With messages: rendered as a chat completion with these "
                                                       "tools (and tool_choice other than none) renders them.")
    add_generation_prompt: bool = Field(True, description="With messages: end with the assistant's turn opening.")
    return_token_strs: bool = Field(False, description="Also return each token's text.")


class DetokenizeRequest(RequestModel):
    model: str | None = None
    tokens: list[int]


# --- responses (documentation; the views build these shapes in api.openai_format) ---
class PromptTokensDetails(Schema):
    cached_tokens: int = Field(description="Prompt tokens served from the prefix cache (the tenant's pinned "
                                           "system prompt, or an earlier identical prefix).")


class Usage(Schema):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class TopLogprob(Schema):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(Schema):
    content: list[TokenLogprob] | None


class ResponseFunctionCall(Schema):
    name: str
    arguments: str


class ResponseToolCall(Schema):
    id: str
    type: Literal["function"]
    function: ResponseFunctionCall


class AssistantMessage(Schema):
    role: Literal["assistant"]
    content: str | None = Field(description="null when the answer is only tool calls.")
    tool_calls: list[ResponseToolCall] | None = None


class ChatChoice(Schema):
    index: int
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: Literal["stop", "length", "tool_calls", "abort"] | None


class ChatCompletion(Schema):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ChunkFunctionCall(Schema):
    name: str | None = None
    arguments: str | None = None


class ChunkToolCall(Schema):
    """A call's first delta carries id, type and function.name (arguments ""); later ones carry
    function.arguments fragments of the call at `index`."""

    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: ChunkFunctionCall


class ChunkDelta(Schema):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ChunkToolCall] | None = None


class ChunkChoice(Schema):
    index: int
    delta: ChunkDelta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: Literal["stop", "length", "tool_calls", "abort"] | None


class ChatCompletionChunk(Schema):
    """One Server-Sent Event `data: {...}` of a streamed chat completion; the stream ends with `data: [DONE]`."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None


class CompletionLogprobs(Schema):
    tokens: list[str]
    token_logprobs: list[float | None] = Field(description="null for an echoed prompt's first token.")
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class CompletionChoice(Schema):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: Literal["stop", "length", "abort"] | None


class Completion(Schema):
    """A completion, or (streamed) one chunk of it with the same shape; the stream ends with `data: [DONE]`."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None


class Model(Schema):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    max_model_len: int | None = Field(description="Context length in tokens (prompt plus completion); null "
                                                  "while the engine is loading.")


class ModelList(Schema):
    object: Literal["list"]
    data: list[Model]


class TokenizeResponse(Schema):
    count: int
    max_model_len: int
    tokens: list[int] = Field(description="The tenant's system prompt first, then the input's tokens.")
    token_strs: list[str] | None


class DetokenizeResponse(Schema):
    prompt: str


class ErrorDetail(Schema):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(Schema):
    error: ErrorDetail
