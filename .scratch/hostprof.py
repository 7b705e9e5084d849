import time, random, statistics, cProfile, pstats
from transformers import LlamaConfig
from inference.bench.gpu import SMOLLM2_135M
from inference.bench.prefix import pin_and_wait
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs
from inference.sampling_params import SamplingParams
shape = dict(SMOLLM2_135M); shape["num_hidden_layers"] = 2
config = EngineConfig(model="test", device="cpu", dtype="float32", num_kv_blocks=1024, max_model_len=2304,
                      max_num_seqs=8, max_num_batched_tokens=8192, async_scheduling=False)
engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**shape)))
rng = random.Random(0)
vocab = engine.model_args.vocab_size
system = [rng.randrange(100, vocab - 100) for _ in range(2000)]
pin_and_wait(engine, "sys", system, "t")
params = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
ta, ts = [], []
for i in range(30):
    prompt = system + [rng.randrange(100, vocab - 100) for _ in range(50)]
    t0 = time.perf_counter()
    engine.add_request(f"r{i}", prompt, params, "t")
    t1 = time.perf_counter()
    out = engine.scheduler.schedule()
    t2 = time.perf_counter()
    ta.append(t1 - t0); ts.append(t2 - t1)
    engine.run_step(out)
print("add_request us", statistics.median(ta) * 1e6, "schedule us", statistics.median(ts) * 1e6)
pr = cProfile.Profile()
for i in range(200):
    prompt = system + [rng.randrange(100, vocab - 100) for _ in range(50)]
    pr.enable()
    engine.add_request(f"p{i}", prompt, params, "t")
    out = engine.scheduler.schedule()
    pr.disable()
    engine.run_step(out)
pstats.Stats(pr).sort_stats("tottime").print_stats(18)
