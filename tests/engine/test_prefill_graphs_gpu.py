"""Captured chat-turn prefills (PrefillGraphs) compute what the eager path computes. Needs a GPU."""
import pytest
import torch
from transformers import LlamaConfig

from benchmarks.gpu import SMOLLM2_135M
from benchmarks.prefix import pin_and_wait
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs
from inference.sampling_params import SamplingParams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def greedy_turns(prefill_graphs: bool, system: list[int], turns: list[list[int]]) -> list[tuple]:
    config = EngineConfig(model="test", device="cuda", dtype="float32", num_kv_blocks=512, max_model_len=512,
                          max_num_seqs=4, seed=0, prefill_graphs=prefill_graphs, async_scheduling=False)
    engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**SMOLLM2_135M)))
    assert (engine.runner.prefill_graphs is not None) == prefill_graphs
    # Pinning computes the prefix in a step that samples nothing (with graphs: a captured step whose
    # replay the engine does not wait for); the turns below must still see the pinned K/V.
    pin_and_wait(engine, "system", system, "t")
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True, logprobs=5)
    results = []
    for i, turn in enumerate(turns):  # one at a time: single-sequence steps, as PrefillGraphs captures
        seq = engine.add_request(f"turn{i}", turn, params, "t")
        while engine.has_unfinished():
            engine.step()
        results.append((seq.output_token_ids, seq.num_cached_tokens, seq.output_logprobs))
    return results


def test_chat_turns_after_a_cached_prefix_match_eager_prefill():
    """fp32, greedy, same seeded random weights: each turn reuses the cached prefix, so its prefill is a
    few new tokens starting mid-sequence; the graph path stages them as one row and derives positions
    and cache slots on the device. Tokens and the top-5 logprobs of every step (a wrong position or
    slot shifts them far more than fp32 rounding) must equal the eager path's; every turn must hit."""
    system = list(range(300, 370))  # 4 full blocks of 16 and a partial one
    turns = [system + list(range(1000 + 7 * i, 1000 + 7 * i + n)) for i, n in enumerate((3, 17, 40, 90))]
    eager, graphs = greedy_turns(False, system, turns), greedy_turns(True, system, turns)
    for (tokens, cached, logprobs), (want_tokens, _, want_logprobs) in zip(graphs, eager):
        assert cached == 64 and tokens == want_tokens
        for got, want in zip(logprobs, want_logprobs):
            assert got.keys() == want.keys()
            assert all(abs(got[t] - want[t]) < 1e-4 for t in want)
