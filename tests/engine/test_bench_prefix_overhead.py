"""`python -m benchmarks --prefix-overhead` on the tiny model: the A/B's bookkeeping, not its timings."""
import pytest

from inference import LLM, SamplingParams
from inference.block_manager import BlockManager
from benchmarks.prefix_overhead import format_prefix_overhead, run_prefix_overhead


def test_the_overhead_run_hits_nothing_times_the_cache_calls_and_leaves_the_engines_as_they_were(tiny_llama_path):
    on, off = (LLM(model=str(tiny_llama_path), progress=False, device="cpu", enable_prefix_caching=caching)
               for caching in (True, False))
    result = run_prefix_overhead(on.engine, off.engine, num_requests=3, prompt_len=40, output_len=3, rounds=2)
    assert result["hit_tokens"] == [0, 0]  # every prompt new: caching on did its work and gained nothing
    # On: hashing and registering every block; off: allocation and freeing only.
    assert result["bm_us_per_request_on"] > 0 and result["bm_us_per_request_off"] > 0  # timed, not compared
    assert result["time_ratio_min"] <= result["time_ratio_median"] <= result["time_ratio_max"]
    assert 0 < result["cache_share_median"] <= result["cache_share_max"] < 1
    assert "0% hits" in format_prefix_overhead(result)
    # The stopwatches are gone, every block is free and each engine caches as it was built to.
    prompt, params = list(range(100, 140)), SamplingParams(temperature=0, max_tokens=2)
    for llm, cached in ((on, [0, 32]), (off, [0, 0])):
        bm = llm.engine.block_manager
        assert bm.take_cached_prefix.__func__ is BlockManager.take_cached_prefix
        assert bm.commit.__func__ is BlockManager.commit
        assert bm.pool.num_free == bm.pool.num_blocks
        assert [llm.generate([prompt], params)[0].num_cached_tokens for _ in range(2)] == cached


def test_the_arms_must_be_built_with_caching_on_and_off(tiny_llama_path):
    llm = LLM(model=str(tiny_llama_path), progress=False, device="cpu")
    with pytest.raises(ValueError, match="off arm"):
        run_prefix_overhead(llm.engine, llm.engine, num_requests=1, prompt_len=16, output_len=1, rounds=1)
