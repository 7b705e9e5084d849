"""Run from the repository root: `PYTHONPATH=. python docs/experiments/2026-12-03/micro.py [A B C D E]`.

One device call: where a pinned chat turn's 7 ms go without the profiler, and candidate fixes.

A. TTFT breakdown of pinned requests (perf_counter marks + CUDA events, no profiler).
B. Graph launch: one 32-layer graph vs 4 graphs of 8 layers (host replay time, wall to done).
C. Split-KV attention (50 q after 2,000 cached): baseline vs hand-prefetched kernel + new merge.
D. GEMMs at M=64: F.linear vs x @ W^T stored transposed vs a Triton skinny kernel (cold L2).
E. argmax over 128k logits: torch vs two-stage.
"""
import statistics
import sys
import time
import traceback

import torch
import triton

sys.path.insert(0, __import__("os").path.dirname(__file__))  # attn_v2, gemm beside this file
SECTIONS = sys.argv[1:] or ["A", "B", "C", "D", "E"]


def graph_time_us(fn, calls, replays=20):
    """Per-call µs of `calls` calls of fn(i) captured in one graph (fn(i) uses the i-th input set)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(calls):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


# ---------------------------------------------------------------------------------------------- A, B
def build_engine():
    from transformers import LlamaConfig

    from inference.bench.gpu import LLAMA3_8B
    from inference.config import EngineConfig
    from inference.engine import LLMEngine
    from inference.models import ModelArgs

    config = EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=8192, max_model_len=2304,
                          max_num_seqs=8, max_num_batched_tokens=8192, prefill_graphs=True, async_scheduling=False)
    return LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**LLAMA3_8B)))


def section_a(engine):
    import random

    from inference.bench.prefix import pin_and_wait, ttft

    pg = engine.runner.prefill_graphs
    marks = {}
    ev = {k: torch.cuda.Event(enable_timing=True) for k in ("run", "replay", "done", "sampled")}

    class TimedGraph:
        def __init__(self, g):
            self.g = g

        def replay(self):
            marks["replay_in"] = time.perf_counter()
            ev["replay"].record()
            self.g.replay()
            ev["done"].record()
            marks["replay_out"] = time.perf_counter()

    orig_graphs = dict(pg.graphs)
    pg.graphs = {k: TimedGraph(g) for k, g in orig_graphs.items()}
    orig_run, orig_exec, orig_sched, orig_add = pg.run, engine.runner.execute, engine.scheduler.schedule, engine.add_request

    def run(out):
        marks["run_in"] = time.perf_counter()
        ev["run"].record()
        return orig_run(out)

    def execute(out):
        r = orig_exec(out)
        marks["exec_out"] = time.perf_counter()
        return r

    def schedule():
        marks.setdefault("sched_in", time.perf_counter())
        r = orig_sched()
        marks.setdefault("sched_out", time.perf_counter())
        return r

    def add(*a, **k):
        marks["t0"] = time.perf_counter()
        r = orig_add(*a, **k)
        marks["added"] = time.perf_counter()
        return r

    pg.run, engine.runner.execute, engine.scheduler.schedule, engine.add_request = run, execute, schedule, add
    rng = random.Random(3)
    vocab = engine.model_args.vocab_size
    system = [rng.randrange(100, vocab - 100) for _ in range(2000)]
    pin_and_wait(engine, "a-system", system, "a")
    rows = []
    for i in range(8):
        marks.clear()
        total, _ = ttft(engine, f"a{i}", system + [rng.randrange(100, vocab - 100) for _ in range(50)], "a",
                        torch.cuda.synchronize)
        t_end = marks["t0"] + total
        m = marks
        rows.append(dict(
            total=total * 1e6,
            add=(m["added"] - m["t0"]) * 1e6,
            sched=(m["sched_out"] - m["sched_in"]) * 1e6,
            pre_other=(m["run_in"] - m["added"] - (m["sched_out"] - m["sched_in"])) * 1e6,
            stage_host=(m["replay_in"] - m["run_in"]) * 1e6,
            replay_call=(m["replay_out"] - m["replay_in"]) * 1e6,
            wait_sample=(m["exec_out"] - m["replay_out"]) * 1e6,
            post=(t_end - m["exec_out"]) * 1e6,
            gpu_stage=ev["run"].elapsed_time(ev["replay"]) * 1e3,
            gpu_graph=ev["replay"].elapsed_time(ev["done"]) * 1e3,
        ))
    engine.unpin("a-system")
    pg.run, engine.runner.execute, engine.scheduler.schedule, engine.add_request = orig_run, orig_exec, orig_sched, orig_add
    pg.graphs = orig_graphs
    print("A. pinned TTFT breakdown, µs, median of 8 (no profiler):")
    for k in rows[0]:
        vals = [r[k] for r in rows]
        print(f"   {k:12s} {statistics.median(vals):8.0f}   (min {min(vals):.0f}, max {max(vals):.0f})")


def section_b(engine):
    """Replay the size-64 prefill graph as it was last staged; then 4 graphs of 8 layers each."""
    from inference.attention import AttentionMetadata, StepContext

    r = engine.runner
    pg = r.prefill_graphs
    size = 64
    g = pg.graphs[size]

    def wall(replays):
        out = []
        for _ in range(10):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            calls = []
            for rp in replays:
                a = time.perf_counter()
                rp()
                calls.append(time.perf_counter() - a)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            out.append(((time.perf_counter() - t0) * 1e6, (t1 - t0) * 1e6, [c * 1e6 for c in calls]))
        out.sort(key=lambda x: x[0])
        return out[len(out) // 2]

    w1 = wall([g.replay])
    print(f"B. one graph (size 64): wall to done {w1[0]:.0f} µs, host replay call {w1[1]:.0f} µs")
    meta = AttentionMetadata(pg.slot_mapping[:size], pg.block_tables, pg.seq_lens, pg.cu_seqlens_q, size,
                             r.max_model_len, False)
    ctx = StepContext(r.kv_caches, meta, r.cos_sin_cache, r.scale)
    model = r.model
    state = {}

    def chunk(lo, hi):
        def f():
            if lo == 0:
                h, res = model.embed_tokens(pg.input_ids[:size]), None
            else:
                h, res = state[lo]
            for layer in model.layers[lo:hi]:
                h, res = layer(h, res, pg.positions[:size], ctx)
            if hi == len(model.layers):
                h, _ = model.norm(h, res)
                return model.compute_logits(h.index_select(0, pg.last_index))
            state[hi] = (h, res)
        return f

    for parts in (4, 8):
        n = len(model.layers)
        bounds = [(i * n // parts, (i + 1) * n // parts) for i in range(parts)]
        graphs = []
        with torch.inference_mode():
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for lo, hi in bounds:
                    f = chunk(lo, hi)
                    f()
                    cg = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(cg, stream=s):
                        out = f()
                    graphs.append(cg)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
        for cg in graphs:
            cg.replay()
        torch.cuda.synchronize()
        same2 = torch.equal(out, pg.logits[size]) if out is not None else None
        w = wall([cg.replay for cg in graphs])
        print(f"   {parts} graphs: wall to done {w[0]:.0f} µs, host replay calls {w[1]:.0f} µs "
              f"({', '.join(f'{c:.0f}' for c in w[2])}); logits equal to the one graph's: {same2}")
        del graphs
    # how long does the graph take on the GPU alone (events)?
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(10):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)  # queue work so the graph launch is off the GPU's critical path
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    print(f"   one graph, GPU time with its launch hidden behind a sleep kernel: {statistics.median(ts):.0f} µs")


# ---------------------------------------------------------------------------------------------- C
def section_c():
    import attn_v2
    from kernels.paged_attention_prefill import (paged_attention_prefill_ref, paged_attention_prefill_split,
                                                 _prefill_split_kernel)

    torch.manual_seed(0)
    hq, hkv, d, bs = 32, 8, 128, 16
    layers, pool = 32, 2048
    q_rows, q_len, seq_len = 64, 50, 2050
    caches = [(torch.randn(pool, bs, hkv, d, device="cuda", dtype=torch.bfloat16),
               torch.randn(pool, bs, hkv, d, device="cuda", dtype=torch.bfloat16)) for _ in range(layers)]
    nblk = triton.cdiv(8192, bs)
    bt = torch.randint(0, pool, (1, nblk), device="cuda", dtype=torch.int32)
    q = torch.randn(q_rows, hq, d, device="cuda", dtype=torch.bfloat16)
    cu = torch.tensor([0, q_len], device="cuda", dtype=torch.int32)
    sl = torch.tensor([seq_len], device="cuda", dtype=torch.int32)
    scale = d ** -0.5
    ref = paged_attention_prefill_ref(q, *caches[0], bt, cu, sl, scale)[:q_len]
    outs = [torch.empty_like(q) for _ in range(layers)]

    def base(i, splits=8):
        return paged_attention_prefill_split(q, *caches[i], bt, cu, sl, scale, q_rows, splits, max_seq_len=8192,
                                             out=outs[i])

    rows = []
    print("C. split-KV attention, 50 q over 2,050 keys (64-row graph shape), µs per layer in a 32-layer graph")
    for name, fn in [("baseline s=8", base),
                     ("baseline s=16", lambda i: base(i, 16))]:
        err = rel(fn(0)[:q_len], ref)
        rows.append((name, err, graph_time_us(fn, layers)))
    variants = []
    for splits in (4, 6, 8, 12):
        for bm, bn, w, st, pf in [(64, 64, 4, 1, True), (128, 64, 8, 1, True), (64, 32, 4, 1, True)]:
            variants.append((splits, bm, bn, w, st, pf))
    rows.append(("integrated (kernels/) default", rel(base(0)[:q_len], ref), graph_time_us(base, layers)))
    for splits, bm, bn, w, st, pf in variants:
        name = f"v2 s={splits} bm={bm} bn={bn} w={w} st={st} pf={int(pf)}"
        try:
            fn = lambda i, a=(splits, bm, bn, w, st, pf): attn_v2.split_v2(  # noqa: E731
                q, *caches[i], bt, cu, sl, scale, q_rows, a[0], out=outs[i], block_m=a[1], block_n=a[2],
                num_warps=a[3], num_stages=a[4], prefetch=a[5])
            err = rel(fn(0)[:q_len], ref)
            rows.append((name, err, graph_time_us(fn, layers)))
        except Exception as e:  # noqa: BLE001
            rows.append((name, float("nan"), float("nan")))
            print(f"   {name}: {type(e).__name__}: {str(e)[:200]}")
    # the merge alone: old vs new, from partials of the baseline
    for splits in ():
        parts = []
        for i in range(layers):
            pa = torch.randn(q_rows, hq, splits, d, device="cuda")
            pm = torch.randn(q_rows, hq, splits, device="cuda")
            ps = torch.rand(q_rows, hq, splits, device="cuda") + 0.5
            parts.append((pa, pm, ps))
        from kernels.paged_attention_prefill import _prefill_merge_kernel

        def old_merge(i, s=splits):
            pa, pm, ps = parts[i]
            _prefill_merge_kernel[(q_rows, hq)](pa, pm, ps, cu, outs[i], 1, hq, s, outs[i].stride(0),
                                                outs[i].stride(1), HEAD_DIM=d, BLOCK_S=triton.next_power_of_2(s),
                                                num_warps=4)
        old_merge(0)
        want = outs[0][:q_len].clone()
        rows.append((f"merge old s={splits}", 0.0, graph_time_us(old_merge, layers)))
        for heads, mw in ((1, 4), (4, 4), (4, 8), (8, 8), (2, 4)):
            def new_merge(i, s=splits, h=heads, w=mw):
                pa, pm, ps = parts[i]
                attn_v2.merge(pa, pm, ps, cu, outs[i], 1, s, h, w)
            new_merge(0)
            rows.append((f"merge v2 s={splits} heads={heads} w={mw}", rel(outs[0][:q_len], want),
                         graph_time_us(new_merge, layers)))
    for name, err, us in rows:
        print(f"   {name:42s} err {err:.1e}  {us:6.1f} µs")


# ---------------------------------------------------------------------------------------------- D
def section_d():
    import gemm

    torch.manual_seed(0)
    shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
    sets = 8
    print(f"D. GEMMs, bf16, µs per call in a graph of {sets} calls over distinct weights (cold L2); "
          "TB/s = weight bytes / time")
    totals = {}
    for k, (n, kk) in shapes.items():
        w = [torch.randn(n, kk, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(sets)]
        wt = [t.t().contiguous() for t in w]  # column-major storage, same [N, K] tensor via .t()
        for m in (64, 1, 16, 256):
            x = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
            ref = torch.nn.functional.linear(x, w[0])
            cands = [("F.linear", lambda i: torch.nn.functional.linear(x, w[i])),
                     ("F.linear col-major W", lambda i: torch.nn.functional.linear(x, wt[i].t()))]
            if m == 64:
                for bn, bk, nw, st in [(64, 128, 4, 4), (32, 128, 4, 4), (64, 64, 4, 6), (128, 64, 4, 4),
                                       (32, 256, 4, 3), (64, 128, 4, 5), (128, 128, 8, 3), (16, 256, 4, 4)]:
                    if n % bn:
                        continue
                    cands.append((f"triton bn={bn} bk={bk} w={nw} st={st}",
                                  lambda i, a=(bn, bk, nw, st): gemm.skinny_linear(x, w[i], *a)))
            for name, fn in cands:
                try:
                    err = rel(fn(0), ref)
                    us = graph_time_us(fn, sets)
                    tbs = n * kk * 2 / (us * 1e-6) / 1e12
                    print(f"   {k:8s} M={m:<4d} {name:32s} err {err:.1e} {us:7.1f} µs  {tbs:.2f} TB/s", flush=True)
                    totals.setdefault((k, m), []).append((us, name))
                except Exception as e:  # noqa: BLE001
                    print(f"   {k:8s} M={m:<4d} {name:32s} failed: {type(e).__name__}: {str(e)[:150]}")
        del w, wt
        torch.cuda.empty_cache()
    print("   best: " + "; ".join(f"{k}/M={m} {min(v)[1]} {min(v)[0]:.1f} µs (F.linear {v[0][0]:.1f})"
                                 for (k, m), v in totals.items()))


# ---------------------------------------------------------------------------------------------- E
def section_e():
    v = 128256
    n = 32
    for rows in (1, 8, 64, 256):
        calls = n if rows <= 8 else 4
        logits = [torch.randn(rows, v, device="cuda", dtype=torch.bfloat16) for _ in range(calls)]
        res = torch.empty(calls, rows, dtype=torch.int64, device="cuda")

        def plain(i):
            res[i].copy_(logits[i].argmax(dim=-1))

        def two_stage(i, width=256):
            vals, idx = logits[i].view(rows, -1, width).max(dim=-1)
            j = vals.argmax(dim=-1, keepdim=True)
            res[i].copy_((j * width + idx.gather(1, j)).squeeze(1))

        plain(0)
        a = res[0].clone()
        two_stage(0)
        print(f"E. argmax [{rows}, {v}] bf16: torch {graph_time_us(plain, calls):.1f} µs, two-stage (501 x 256) "
              f"{graph_time_us(two_stage, calls):.1f} µs, same index: {torch.equal(a, res[0])}")


def main():
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    t0 = time.time()
    for name, fn in (("C", section_c), ("D", section_d), ("E", section_e)):
        if name in SECTIONS:
            try:
                fn()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            torch.cuda.empty_cache()
            print(f"   [{time.time() - t0:.0f} s]", flush=True)
    if "A" in SECTIONS or "B" in SECTIONS:
        engine = build_engine()
        from inference.bench.prefix import run_prefix_bench, format_prefix

        print(format_prefix(run_prefix_bench(engine, 2000, 50, 5, torch.cuda.synchronize)), flush=True)
        for name, fn in (("A", section_a), ("B", section_b)):
            if name in SECTIONS:
                try:
                    fn(engine)
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
                print(f"   [{time.time() - t0:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
