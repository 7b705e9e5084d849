"""Structured outputs (xgrammar): JSON schema, json_object, regex, choice and grammar constraints on the
real SmolLM2 and on a tiny random model, with n > 1, preemption, a mixed batch and the core process."""
import asyncio
import json
import pickle
import re

import jsonschema_rs
import pytest

from inference import LLM, AsyncLLM, EngineConfig, SamplingParams, StructuredOutputsParams
from inference.errors import InvalidRequestError

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "languages": {"type": "array", "items": {"type": "string", "enum": ["ko", "en", "ja"]}, "maxItems": 3},
    },
    "required": ["name", "age", "languages"],
}
ASK = [{"role": "user", "content": "Describe a person named Kim, 31, who speaks Korean and English, as JSON."}]


def constrained(**so) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=80, structured_outputs=StructuredOutputsParams(**so))


def test_json_schema_output_parses_and_validates(smol):
    out = smol.chat(ASK, constrained(json=PERSON))[0].outputs[0]
    assert out.finish_reason == "stop"
    value = json.loads(out.text)
    jsonschema_rs.validate(PERSON, value)
    assert list(value) == ["name", "age", "languages"]  # the schema's property order


def test_json_object_regex_choice_and_grammar(smol):
    outs = smol.chat([[{"role": "user", "content": 'Reply with this JSON object: {"ok": true}'}],
                      [{"role": "user", "content": "What is the phone number of the office?"}],
                      [{"role": "user", "content": "Is the sky blue? Answer yes or no."}],
                      [{"role": "user", "content": "Say a greeting."}]],
                     [constrained(json_object=True, disable_any_whitespace=True),
                      constrained(regex=r"\d{3}-\d{4}"),
                      constrained(choice=["yes", "no", "it depends"]),
                      constrained(grammar='root ::= ("hello" | "hi") " " [a-z]+ "!"')])
    obj, phone, choice, greeting = (o.outputs[0] for o in outs)
    assert obj.finish_reason == "stop" and isinstance(json.loads(obj.text), dict)
    assert obj.text.startswith("{") and "\n" not in obj.text  # compact: no free whitespace
    assert re.fullmatch(r"\d{3}-\d{4}", phone.text) and phone.finish_reason == "stop"
    assert choice.text in ("yes", "no", "it depends") and choice.finish_reason == "stop"
    assert re.fullmatch(r"(hello|hi) [a-z]+!", greeting.text) and greeting.finish_reason == "stop"


def test_mixed_batch_leaves_unconstrained_requests_alone(smol):
    free = SamplingParams(temperature=0, max_tokens=24)
    alone = smol.chat([ASK, ASK], free)
    mixed = smol.chat([ASK, ASK, ASK], [free, constrained(json=PERSON), free])
    assert [o.outputs[0].token_ids for o in alone] == [mixed[0].outputs[0].token_ids, mixed[2].outputs[0].token_ids]
    jsonschema_rs.validate(PERSON, json.loads(mixed[1].outputs[0].text))


def test_n_choices_each_follow_the_grammar(smol):
    params = SamplingParams(n=4, temperature=1.0, seed=7, max_tokens=12,
                            structured_outputs=StructuredOutputsParams(regex=r"(red|green|blue)-[0-9]{2}"))
    outs = smol.chat([{"role": "user", "content": "Name a color and a number."}], params)[0].outputs
    assert len(outs) == 4
    for o in outs:
        assert re.fullmatch(r"(red|green|blue)-[0-9]{2}", o.text) and o.finish_reason == "stop"


def test_complete_grammar_ends_the_request_even_with_ignore_eos(smol):
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True,
                            structured_outputs=StructuredOutputsParams(choice=["alpha", "beta"]))
    out = smol.generate("Pick one:", params)[0].outputs[0]
    assert out.text in ("alpha", "beta") and out.finish_reason == "stop"
    assert len(out.token_ids) < 30


@pytest.mark.parametrize("so, names", [
    (dict(json={"type": "objekt"}), "objekt"),
    (dict(json='{"type": "object", '), "JSON"),
    (dict(regex="(ab"), "parenthesis"),
    (dict(grammar='root ::= missing_rule'), "missing_rule"),
])
def test_invalid_constraint_is_a_value_error_before_scheduling(smol, so, names):
    engine = smol.engine
    params = SamplingParams(max_tokens=4, structured_outputs=so)  # a dict of the fields is taken too
    with pytest.raises(ValueError, match=names) as info:
        engine.add_request("bad-constraint", smol.encode("hi"), params)
    assert isinstance(info.value, InvalidRequestError) and info.value.field == "structured_outputs"
    assert not engine.has_unfinished() and "bad-constraint" not in engine.output_processor
    assert smol.generate("Hi", SamplingParams(max_tokens=2))[0].outputs[0].token_ids  # still serving


@pytest.mark.parametrize("so", [dict(), dict(json={}, regex="a"), dict(choice=[]), dict(choice=["a", 1]),
                                dict(regex=""), dict(whitespace_pattern=" ", json={}),
                                dict(structural_tag="{}"), dict(json_object="yes")])
def test_params_are_checked_when_built(so):
    with pytest.raises(InvalidRequestError, match="structured_outputs"):
        StructuredOutputsParams(**so)


def test_params_from_a_dict_pickle_and_key():
    params = SamplingParams(structured_outputs={"json": PERSON})
    so = params.structured_outputs
    assert isinstance(so, StructuredOutputsParams) and so.kind == "json"
    assert pickle.loads(pickle.dumps(params)).structured_outputs == so  # the core process gets it as sent
    assert so.key() == StructuredOutputsParams(json=json.dumps(PERSON)).key()
    with pytest.raises(InvalidRequestError, match="does not take guided_json"):
        SamplingParams(structured_outputs={"guided_json": PERSON})


def test_grammars_are_compiled_once_per_constraint(smol):
    grammars = smol.engine.grammars
    a = grammars.compile(StructuredOutputsParams(regex=r"[0-9]{4}"))
    b = grammars.compile(StructuredOutputsParams(regex=r"[0-9]{4}"))
    c = grammars.compile(StructuredOutputsParams(regex=r"[0-9]{5}"))
    assert a is b and a is not c


def test_the_compiler_is_built_ahead_of_the_first_constrained_request(tiny_llama_path):
    """warm_up (the engine core's start) builds the vocabulary's table in a thread; the first request
    then finds it, and a constraint compiled from it works."""
    grammars = LLM(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=16).engine.grammars
    assert grammars._compiler is None  # an offline engine builds it on first use
    grammars.warm_up()
    grammars.close()  # waits for the build (a core process exits only after it)
    built = grammars._compiler
    assert built is not None
    matcher = grammars.matcher(StructuredOutputsParams(choice=["yes", "no"]))
    assert grammars._compiler is built and not matcher.is_terminated()


def test_matcher_state_survives_preemption(tiny_llama_path):
    """A pool too small for every sequence at once preempts some mid-output; each recomputes its
    prompt and output and goes on from its matcher's state: the tokens are those of a roomy pool."""
    regex = r"[a-z]{3,6}( [a-z]{3,6}){4}\."
    prompts = [f"Request number {i}: write five words." for i in range(6)]
    params = SamplingParams(temperature=0, max_tokens=60, ignore_eos=True,
                            structured_outputs=StructuredOutputsParams(regex=regex))
    roomy = LLM(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=64)
    expected = [o.outputs[0].token_ids for o in roomy.generate(prompts, params)]
    tight = LLM(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=10, block_size=8)
    outs = tight.generate(prompts, params)
    assert tight.engine.scheduler.num_preemptions > 0
    assert [o.outputs[0].token_ids for o in outs] == expected
    for o in outs:
        assert re.fullmatch(regex, o.outputs[0].text) and o.outputs[0].finish_reason == "stop"


def test_core_process_takes_structured_outputs(tiny_llama_path):
    engine = AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64))
    try:
        assert engine.core.process is not None
        ids = engine.encode_chat([{"role": "user", "content": "Pick."}])

        async def run(params):
            return [d async for d in engine.generate("so-1", ids, params)]

        deltas = asyncio.run(run(SamplingParams(temperature=0, max_tokens=20, structured_outputs={
            "choice": ["left", "right", "up"]})))
        assert "".join(d.text for d in deltas) in ("left", "right", "up") and deltas[-1].finish_reason == "stop"
        with pytest.raises(InvalidRequestError, match="structured_outputs"):
            asyncio.run(run(SamplingParams(structured_outputs={"regex": "[a-"})))
        assert engine.is_alive()
    finally:
        engine.shutdown()


def _gated_compiles(grammars, monkeypatch):
    """Hold every compile of `grammars` (the real one, run when the returned event is set)."""
    import threading

    gate = threading.Event()
    compile_for_real = grammars.compile

    def held_compile(params):
        gate.wait(60)
        return compile_for_real(params)

    monkeypatch.setattr(grammars, "compile", held_compile)
    return gate


def test_a_new_grammar_compiles_while_the_other_streams_keep_stepping(tiny_llama_path, monkeypatch):
    """The core compiles a new constraint in a thread: the request waits outside the engine meanwhile,
    a running stream goes on producing tokens, and the request then runs under its grammar."""
    from inference import LLMEngine

    engine = LLMEngine(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64), progress=False)
    gate = _gated_compiles(engine.grammars, monkeypatch)
    llm = AsyncLLM(engine=engine)
    ids = llm.encode_chat([{"role": "user", "content": "Pick."}])
    choices = ["north", "south", "east"]

    async def scenario():
        free = llm.generate("free", ids, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True))
        constrained_out = asyncio.ensure_future(_collect(llm.generate("held", ids, SamplingParams(
            temperature=0, max_tokens=10, structured_outputs={"choice": choices}))))
        free_tokens = 0
        async for d in free:  # every token of this stream comes while the other's grammar is held
            free_tokens += len(d.token_ids)
            assert "held" not in engine.output_processor
        assert free_tokens == 40 and not constrained_out.done()
        gate.set()
        return await constrained_out

    deltas = asyncio.run(scenario())
    try:
        assert "".join(d.text for d in deltas) in choices and deltas[-1].finish_reason == "stop"
    finally:
        llm.shutdown()


def test_a_request_aborted_while_its_grammar_compiles_never_runs(tiny_llama_path, monkeypatch):
    from inference import LLMEngine

    engine = LLMEngine(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64), progress=False)
    gate = _gated_compiles(engine.grammars, monkeypatch)
    added = []
    add_for_real = engine.add_request
    monkeypatch.setattr(engine, "add_request", lambda request_id, *a, **kw: (added.append(request_id),
                                                                             add_for_real(request_id, *a, **kw))[1])
    llm = AsyncLLM(engine=engine)
    ids = llm.encode_chat([{"role": "user", "content": "Pick."}])
    free_blocks = engine.block_manager.pool.num_free

    async def scenario():
        task = asyncio.ensure_future(_collect(llm.generate("gone", ids, SamplingParams(
            temperature=0, max_tokens=10, structured_outputs={"regex": "[0-9]{3}"}))))
        await asyncio.sleep(0.2)
        task.cancel()  # the client went away while its grammar compiled
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)  # the abort reaches the core
        gate.set()
        # a later request with the same constraint finds it compiled, and runs
        return await _collect(llm.generate("next", ids, SamplingParams(
            temperature=0, max_tokens=10, structured_outputs={"regex": "[0-9]{3}"})))

    try:
        deltas = asyncio.run(scenario())
        assert re.fullmatch("[0-9]{3}", "".join(d.text for d in deltas))
        assert added == ["next"] and not engine.has_unfinished()
        assert engine.block_manager.pool.num_free == free_blocks
    finally:
        llm.shutdown()


def test_a_constraint_that_fails_to_compile_in_the_core_is_refused_and_the_core_goes_on(tiny_llama_path,
                                                                                        monkeypatch):
    from inference import LLMEngine

    engine = LLMEngine(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64), progress=False)

    def failing_compile(params):
        raise InvalidRequestError("structured_outputs.regex cannot be compiled: too large", field="structured_outputs")

    monkeypatch.setattr(engine.grammars, "compile", failing_compile)
    llm = AsyncLLM(engine=engine)
    ids = llm.encode_chat([{"role": "user", "content": "Pick."}])
    try:
        with pytest.raises(InvalidRequestError, match="cannot be compiled: too large"):
            asyncio.run(_collect(llm.generate("bad", ids, SamplingParams(structured_outputs={"regex": "[0-9]+"}))))
        deltas = asyncio.run(_collect(llm.generate("fine", ids, SamplingParams(temperature=0, max_tokens=5))))
        assert deltas[-1].finished and llm.is_alive()
    finally:
        llm.shutdown()


async def _collect(stream) -> list:
    return [d async for d in stream]
