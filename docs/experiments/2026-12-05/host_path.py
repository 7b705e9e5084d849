"""Host time of a chat turn after its tenant's pinned system prompt, on the CPU: add_request (validation,
the sequence) and schedule (the prefix hit: hashes, block ids, admission), for a 2,000-token pinned
prompt + a 50-token question. A tiny random model: no weights, and the model's step is not timed.

    PYTHONPATH=. python docs/experiments/2026-12-05/host_path.py [repeats]
"""
import random
import statistics
import sys
import time

from inference.bench.prefix import pin_and_wait
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs
from inference.sampling_params import SamplingParams

ARGS = ModelArgs(vocab_size=32000, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                 head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                 max_position_embeddings=4096, tie_word_embeddings=False, qkv_bias=False)


def main(repeats: int) -> None:
    engine = LLMEngine(EngineConfig(model="tiny-random", device="cpu", num_kv_blocks=2048), progress=False,
                       model_args=ARGS)
    rng = random.Random(0)
    system = [rng.randrange(100, 31000) for _ in range(2000)]
    pin_and_wait(engine, "system", system, "t")
    params = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    add, schedule = [], []
    for i in range(20 + repeats):
        prompt = system + [rng.randrange(100, 31000) for _ in range(50)]
        t0 = time.perf_counter()
        engine.add_request(f"turn{i}", prompt, params, "t")
        t1 = time.perf_counter()
        out = engine.scheduler.schedule()
        t2 = time.perf_counter()
        assert out.scheduled[0].start == 2000  # the pin was hit
        engine.run_step(out)
        while engine.has_unfinished():
            engine.step()
        if i >= 20:  # after a warm-up
            add.append(t1 - t0)
            schedule.append(t2 - t1)
    print(f"median of {repeats}: add_request {1e6 * statistics.median(add):.1f} us, "
          f"schedule {1e6 * statistics.median(schedule):.1f} us")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
