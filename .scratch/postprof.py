import time, random, statistics
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
real = engine.runner.execute
engine.runner.execute = lambda out: [(123, None) for _ in out.scheduled]  # host post-processing only
for mt in (1, 2):
    params = SamplingParams(temperature=0, max_tokens=mt, ignore_eos=True)
    times = []
    for i in range(50):
        prompt = system + [rng.randrange(100, vocab - 100) for _ in range(50)]
        engine.add_request(f"r{mt}-{i}", prompt, params, "t")
        out = engine.scheduler.schedule()
        t0 = time.perf_counter()
        engine.run_step(out)
        times.append(time.perf_counter() - t0)
        while engine.has_unfinished():
            engine.step()
    print(f"max_tokens={mt}: first step's post-processing {statistics.median(times)*1e6:.1f} us")
