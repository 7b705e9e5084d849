"""The engine's queue bound (EngineConfig.max_num_waiting), without a server: a burst that arrives
between two steps fills the free sequence slots first, then the queue, and only then is refused."""
import pytest

from inference import LLM, SamplingParams
from inference.errors import QueueFullError

PARAMS = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)


def test_a_burst_fills_the_free_slots_and_the_queue_then_is_refused(tiny_llama_path):
    engine = LLM(model=str(tiny_llama_path), progress=False, device="cpu", max_num_seqs=4, max_num_waiting=6).engine
    for i in range(10):  # 4 for the free slots, 6 queued, all before a step runs
        engine.add_request(f"r{i}", [10 + i, 20, 30], PARAMS)
    with pytest.raises(QueueFullError, match="6 requests are waiting"):
        engine.add_request("r10", [11, 20, 30], PARAMS)
    engine.step()  # 4 running, 6 waiting: still full
    assert (engine.scheduler.num_running, engine.scheduler.num_waiting) == (4, 6)
    with pytest.raises(QueueFullError):
        engine.add_request("r11", [12, 20, 30], PARAMS)
    while engine.has_unfinished():
        engine.step()
    engine.add_request("r12", [13, 20, 30], PARAMS)  # drained: accepted again
    while engine.has_unfinished():
        engine.step()
    assert engine.block_manager.pool.num_used == 0
