"""Tools in the chat prompt (inference.tool_prompt): a template that renders tools gets them and the call
history as Hugging Face templates take them; one that ignores tools (SmolLM2's) gets the generic
Hermes-style prompt, offline (LLM.chat) as on the server."""
import json

import pytest

from inference import SamplingParams
from inference.tool_parsers import get_tool_parser
from inference.tool_prompt import template_renders_tools, with_tools

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
HISTORY = [
    {"role": "system", "content": "You are Acme's assistant."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "21 C"},
]
# A template in the style of Qwen2.5's: tools in the system turn, calls and results rendered from the history.
NATIVE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    "{% if loop.first and tools %}\n# Tools\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}{% endif %}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tokenizer(smol_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smol_path)


def test_smollm2_template_ignores_tools_so_the_generic_prompt_is_used(tokenizer):
    assert not template_renders_tools(tokenizer)
    messages, tools = with_tools(tokenizer, HISTORY, TOOLS)
    assert tools is None
    system = messages[0]["content"]
    assert system.startswith("You are Acme's assistant.\n\n# Tools")  # the tenant's prompt stays first
    assert json.dumps(TOOLS[0]) in system
    # the assistant's call as a Hermes block, which the Hermes parser reads back
    assert messages[2] == {"role": "assistant",
                           "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'}
    parsed = get_tool_parser("hermes").parse(messages[2]["content"])
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [("get_weather", {"city": "Paris"})]
    # consecutive tool results: one user turn
    assert messages[3:] == [{"role": "user", "content": "<tool_response>\nsunny\n</tool_response>\n"
                                                        "<tool_response>\n21 C\n</tool_response>"}]
    assert len(messages) == 4
    assert HISTORY[2]["content"] is None and "tool_calls" in HISTORY[2]  # the caller's list is left alone


def test_without_a_system_turn_the_tools_get_one(tokenizer):
    messages, _ = with_tools(tokenizer, [{"role": "user", "content": "Hi"}], TOOLS)
    assert messages[0]["role"] == "system" and messages[0]["content"].startswith("# Tools")
    assert with_tools(tokenizer, [{"role": "user", "content": "Hi"}], None) == ([{"role": "user", "content": "Hi"}],
                                                                                 None)


def test_a_template_that_renders_tools_gets_them_with_arguments_as_objects(tokenizer):
    assert template_renders_tools(tokenizer, NATIVE)
    messages, tools = with_tools(tokenizer, HISTORY, TOOLS, NATIVE)
    assert tools == TOOLS
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert messages[2]["content"] == ""
    text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=NATIVE, tokenize=False,
                                         add_generation_prompt=True)
    assert '"name": "get_weather"' in text and '"arguments": {"city": "Paris"}' in text.split("<tool_call>")[1]


def test_offline_chat_with_tools_renders_them(smol):
    [out] = smol.chat([{"role": "user", "content": "Weather in Paris?"}], SamplingParams(max_tokens=1),
                      tools=TOOLS)
    assert "<tools>" in out.prompt and '"name": "get_weather"' in out.prompt
    [native] = smol.chat([{"role": "user", "content": "Weather in Paris?"}], SamplingParams(max_tokens=1),
                         tools=TOOLS, chat_template=NATIVE)
    assert "# Tools\n" in native.prompt and "<tools>" not in native.prompt
