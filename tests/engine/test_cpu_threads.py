"""EngineConfig.cpu_threads: the threads an engine on the CPU computes with (a server leaves a core to
each of its web processes: pagoda.env.engine_cpu_threads)."""
import pytest
import torch

from inference import EngineConfig, LLMEngine


def test_a_bad_thread_count_is_refused():
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="cpu_threads"):
            EngineConfig(cpu_threads=bad)


def test_an_engine_on_the_cpu_computes_with_the_threads_it_is_given(tiny_llama_path):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        LLMEngine(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64), progress=False)
        assert torch.get_num_threads() == 2  # None: left as it was
        LLMEngine(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64, cpu_threads=1),
                  progress=False)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
