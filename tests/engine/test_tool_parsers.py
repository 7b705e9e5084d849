"""The tool-call parsers on outputs recorded in each family's format: single and parallel calls, text
before the call, malformed JSON (plain content), and the same outputs streamed in pieces split at every
place (the streamed content and calls add up to the whole parse)."""
import json

import pytest

from inference.tool_parsers import ToolCall, detect_tool_parser, get_tool_parser
from inference.tool_parsers.stream import ToolCallStream, final_content

WEATHER = {"city": "Paris", "unit": "celsius"}

# (parser, output, expected content, expected calls as (name, arguments))
CASES = [
    # Qwen2.5 / Qwen3 (Hermes): one call, as Qwen2.5-7B-Instruct writes it
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>',
     "", [("get_weather", WEATHER)]),
    # parallel calls, with the new lines Qwen leaves between blocks
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
               '<tool_call>\n{"name": "get_time", "arguments": {"zone": "Europe/Paris"}}\n</tool_call>',
     "", [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "Europe/Paris"})]),
    # Qwen3 thinks first, then calls
    ("hermes", "<think>\nThe user wants the weather.\n</think>\n\nLet me look that up.\n<tool_call>\n"
               '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     "<think>\nThe user wants the weather.\n</think>\n\nLet me look that up.", [("get_weather", {"city": "Paris"})]),
    # the last block left open by the end of the output, its JSON whole (EOS right after it)
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}', "",
     [("get_weather", {"city": "Paris"})]),
    # malformed JSON: the block stays content, as written
    ("hermes", 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"\n</tool_call>',
     'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"\n</tool_call>', []),
    # a block without a name is not a call; the good one after it is
    ("hermes", '<tool_call>\n{"arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
     '<tool_call>\n{"arguments": {}}\n</tool_call>', [("f", {})]),
    # arguments written as a JSON string (some fine-tunes do)
    ("hermes", '<tool_call>\n{"name": "f", "arguments": "{\\"x\\": 1}"}\n</tool_call>', "", [("f", {"x": 1})]),
    # plain text that merely mentions a tag
    ("hermes", "Use <tool_call> tags to call tools.", "Use <tool_call> tags to call tools.", []),
    # non-ASCII arguments stay as they are
    ("hermes", '<tool_call>\n{"name": "translate", "arguments": {"text": "안녕하세요"}}\n</tool_call>', "",
     [("translate", {"text": "안녕하세요"})]),

    # Llama 3.1 / 3.2 / 3.3: bare JSON with "parameters"
    ("llama3_json", '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}', "",
     [("get_weather", WEATHER)]),
    ("llama3_json", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', "",
     [("get_weather", {"city": "Paris"})]),
    # parallel calls separated by "; " (Llama 3.2's habit)
    ("llama3_json", '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
                    '{"name": "get_time", "parameters": {"zone": "CET"}}', "",
     [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET"})]),
    # text, then the tag and the call
    ("llama3_json", 'I will check the weather.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
     "I will check the weather.", [("get_weather", {"city": "Oslo"})]),
    # JSON of the model's own (not a call) is content
    ("llama3_json", '{"answer": 42}', '{"answer": 42}', []),
    # malformed JSON is content
    ("llama3_json", '{"name": "get_weather", "parameters": {"city": "Paris"', '{"name": "get_weather", '
                    '"parameters": {"city": "Paris"', []),
    ("llama3_json", "The weather in Paris is sunny.", "The weather in Paris is sunny.", []),

    # Mistral v3 tokenizers: a JSON list after [TOOL_CALLS]
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]', "",
     [("get_weather", WEATHER)]),
    ("mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, '
                '{"name": "get_time", "arguments": {"zone": "CET"}}]', "",
     [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET"})]),
    ("mistral", 'Let me check.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
     "Let me check.", [("get_weather", {"city": "Paris"})]),
    # the marker dropped (a tokenizer that strips special tokens)
    ("mistral", '[{"name": "get_weather", "arguments": {"city": "Paris"}}]', "",
     [("get_weather", {"city": "Paris"})]),
    # v11+ tokenizers: name[ARGS]{...}, one marker per call
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}', "",
     [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET"})]),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": ', '[TOOL_CALLS][{"name": '
                '"get_weather", "arguments": {"city": ', []),
    ("mistral", "It is sunny in Paris.", "It is sunny in Paris.", []),
]


def _calls(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in calls]


@pytest.mark.parametrize("name, text, content, calls", CASES)
def test_parse_whole_output(name, text, content, calls):
    parsed = get_tool_parser(name).parse(text)
    assert _calls(parsed.calls) == calls
    assert final_content(parsed.content, bool(parsed.calls)) == (content if not calls else (content or None))


def _stream(name: str, pieces: list[str]) -> tuple[str, list[ToolCall]]:
    stream = ToolCallStream(get_tool_parser(name))
    content, calls = "", []
    for i, piece in enumerate(pieces):
        fragment, new = stream.feed(piece, final=i == len(pieces) - 1)
        content += fragment
        calls += new
    return content, calls


@pytest.mark.parametrize("name, text, content, calls", CASES)
def test_streamed_in_two_pieces_at_every_split_adds_up_to_the_whole(name, text, content, calls):
    for split in range(len(text) + 1):
        streamed_content, streamed_calls = _stream(name, [text[:split], text[split:]])
        assert _calls(streamed_calls) == calls, split
        assert streamed_content == (content if calls else text), split


@pytest.mark.parametrize("name, text, content, calls", CASES)
def test_streamed_one_character_at_a_time(name, text, content, calls):
    streamed_content, streamed_calls = _stream(name, list(text) + [""])
    assert _calls(streamed_calls) == calls
    assert streamed_content == (content if calls else text)


def test_a_call_is_handed_out_once_its_block_closes_and_text_waits_on_a_marker_prefix():
    stream = ToolCallStream(get_tool_parser("hermes"))
    assert stream.feed("Checking.<tool_") == ("Checking.", [])  # "<tool_" may begin a call: held back
    assert stream.feed('call>\n{"name": "f", "arguments": {"a": 1}}') == ("", [])  # not closed yet
    content, calls = stream.feed("\n</tool_call>")
    assert content == "" and _calls(calls) == [("f", {"a": 1})]
    assert stream.feed("", final=True) == ("", [])


def test_required_answers_a_json_list_of_calls_streamed_element_by_element():
    parser = get_tool_parser("llama3_json")
    text = '[{"name": "f", "parameters": {"a": [1, 2]}}, {"name": "g", "parameters": {"s": "x}]"}}]'
    stream = ToolCallStream(parser, required=True)
    seen = []
    for ch in text:
        content, calls = stream.feed(ch)
        assert content == ""
        seen += calls
    assert _calls(seen) == [("f", {"a": [1, 2]}), ("g", {"s": "x}]"})]
    assert _calls(parser.parse_required(text)) == _calls(seen)


def test_required_schema_names_each_function_in_the_family_format():
    functions = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
                 {"name": "g"}]
    schema = get_tool_parser("llama3_json").required_schema(functions, parallel=False)
    assert schema["maxItems"] == 1 and schema["minItems"] == 1
    first, second = schema["items"]["anyOf"]
    assert first["properties"] == {"name": {"const": "f"}, "parameters": functions[0]["parameters"]}
    assert second["properties"]["parameters"] == {"type": "object"}
    assert "maxItems" not in get_tool_parser("hermes").required_schema(functions, parallel=True)


def test_call_ids():
    assert get_tool_parser("hermes").new_call_id().startswith("call_")
    mistral_id = get_tool_parser("mistral").new_call_id()
    assert len(mistral_id) == 9 and mistral_id.isalnum()  # Mistral's template refuses any other id


@pytest.mark.parametrize("template, parser", [
    ("{%- if tools %}<tool_call>{%- endif %}", "hermes"),                  # Qwen2.5 / Qwen3
    ("{{- '<|python_tag|>' }}{{ tool_call.parameters }}", "llama3_json"),  # Llama 3.1
    ('{{- "[TOOL_CALLS] [" }}', "mistral"),                                # Mistral
    ("{% for message in messages %}{{ message['content'] }}{% endfor %}", "hermes"),  # no tools: generic
    (None, "hermes"),
])
def test_parser_chosen_from_the_chat_template(template, parser):
    assert detect_tool_parser(template) == parser


def test_unknown_parser_name_says_the_choices():
    with pytest.raises(ValueError, match="hermes, llama3_json, mistral"):
        get_tool_parser("qwen")
