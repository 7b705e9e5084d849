"""benchmarks.workload on the tiny model: which engine.step() calls count as decode, read from the trace."""
from inference import LLM
from benchmarks.workload import random_prompts, run_engine


def test_decode_only_steps_are_read_from_the_step_trace(tiny_llama_path):
    # A budget of 32 tokens: step 1 prefills A (24) and 8 of B's 24; step 2 decodes A and prefills the
    # rest of B. Steps 3-6 decode both (A's sixth token ends it), step 7 decodes B alone.
    engine = LLM(model=str(tiny_llama_path), progress=False, device="cpu", max_num_batched_tokens=32).engine
    prompts = random_prompts(2, [24, 24], engine.model_args.vocab_size)
    run = run_engine(engine, "w", prompts, [6, 6])
    assert [len(t) for t in run.token_ids] == [6, 6]
    tokens_per_decode_step = run.decode_tok_s * run.decode_step_ms / 1e3
    assert abs(tokens_per_decode_step - 9 / 5) < 1e-9  # 2+2+2+2+1 tokens over steps 3-7, not steps 1-2
    assert engine.trace is None  # tracing was on for the run only


def test_a_trace_switched_on_by_the_caller_stays_on(tiny_llama_path):
    engine = LLM(model=str(tiny_llama_path), progress=False, device="cpu").engine
    mine = []
    engine.trace = mine
    run_engine(engine, "w", random_prompts(2, [20, 20], engine.model_args.vocab_size), [3, 3])
    assert engine.trace is mine and mine == []  # the run's own steps were recorded apart
