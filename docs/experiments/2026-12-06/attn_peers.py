"""How fast can the chat turn's attention be? Our split kernel against peers, same shape, same GPU.

The pinned chat turn (50 new queries after 2,000 cached keys, Llama-3-8B heads) spends ~0.53 ms of
its ~5.5 ms (H200) in attention, ~15 us a layer, while its bytes (8.4 MB of K/V a layer) need ~2 us
and its FLOPs (~1.7 GFLOP a layer) ~2 us. Before building a new attention kernel, this measures
what others reach on the same problem:

- `ours`: paged_attention_prefill_split as the engine runs it (PrefillGraphs' 64-row shape, default
  config and splits), block table shuffled over the pool; `ours consecutive`: block ids in order.
- `torch sdpa <backend>`: torch's flash / cuDNN / mem-efficient kernels on dense K/V [1, Hkv, L, D]
  (GQA native where the backend takes enable_gqa, else K/V expanded to Hq heads), lower-right causal
  mask where the backend takes it, else no mask (timing only: the diagonal is 50 x 50 of 2,050).
- `dense tma` / `dense ptr`: our split kernel's loop on dense K/V [L, Hkv, D], the K/V tiles
  brought by TMA descriptors (`tl.range` pipelined, `STAGES`) or by plain pointer loads through
  Triton's pipeliner: what the paging indirection and the hand prefetch into registers cost. One of
  them also timed as its split loop alone and its merge alone: the merge kernel's share.
- `ours, N new tokens`: the engine's kernel at 16 .. 64 new tokens in the same 64-row graph shape
  (timing only): how the cost follows the query tiles (16 tokens x 4 heads a tile).

All timed as CUDA-graph replays of 32 calls over 32 layers' K/V (nothing served from L2 across
layers), median of `triton.testing.do_bench`; each variant is checked against the fp32 reference.

Run: PYTHONPATH=. python docs/experiments/2026-12-06/attn_peers.py   (CPU: TRITON_INTERPRET=1 ... --check)
"""

import importlib
import math
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, ".")
from kernels._paged import LOG2E, split_key_range  # noqa: E402

pp = importlib.import_module("kernels.paged_attention_prefill")  # the package re-exports a function of that name

HQ, HKV, D, BS = 32, 8, 128, 16
NEW, CACHED, LAYERS = 50, 2000, 32
GQA = HQ // HKV


@triton.jit
def _dense_split_kernel(
    q_ptr, k_desc, v_desc, k_ptr, v_ptr, part_acc_ptr, part_max_ptr, part_sum_ptr,
    qk_scale, q_len, seq_len, num_q_heads, num_kv_heads, num_splits, num_q_tiles,
    stride_q_tok, stride_q_head, stride_kv_tok,
    GQA: tl.constexpr, GQA_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr, STAGES: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    BLOCK_Q: tl.constexpr = BLOCK_M // GQA_PAD
    pid = tl.program_id(0)
    q_tile = pid % num_q_tiles
    rest = pid // num_q_tiles
    kv_head = rest % num_kv_heads
    split = rest // num_kv_heads
    tok_start = q_tile * BLOCK_Q
    if tok_start >= q_len:
        return
    ctx_len = seq_len - q_len
    lo, hi = split_key_range(seq_len, split, num_splits, BLOCK_N)
    kv_end = tl.minimum(seq_len, ctx_len + tok_start + BLOCK_Q)
    hi = tl.minimum(hi, kv_end)
    q, q_rows, heads, mask_m, query_pos = pp._load_query_tile(
        q_ptr, 0, q_len, ctx_len, tok_start, kv_head, stride_q_tok, stride_q_head, GQA, GQA_PAD, HEAD_DIM, BLOCK_M
    )
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    col = kv_head * HEAD_DIM
    mid = lo + tl.maximum(tl.minimum(hi, ctx_len + tok_start + 1) - lo, 0) // BLOCK_N * BLOCK_N
    for start in tl.range(lo, mid, BLOCK_N, num_stages=STAGES):
        if USE_TMA:
            k = k_desc.load([start, col])
            v = v_desc.load([start, col])
        else:
            offs = (start + offs_n).to(tl.int64)[:, None] * stride_kv_tok + col + offs_d[None, :]
            k = tl.load(k_ptr + offs)
            v = tl.load(v_ptr + offs)
        acc, m_i, l_i = pp._full_tile_step(q, k, v, acc, m_i, l_i, qk_scale, DOT_PRECISION)
    for start in range(mid, hi, BLOCK_N):
        pos = start + offs_n
        mask_n = pos < hi
        offs = pos.to(tl.int64)[:, None] * stride_kv_tok + col + offs_d[None, :]
        k = tl.load(k_ptr + offs, mask=mask_n[:, None], other=0.0)
        v = tl.load(v_ptr + offs, mask=mask_n[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        s = tl.where((pos[None, :] <= query_pos[:, None]) & mask_n[None, :], s, float("-inf"))
        acc, m_i, l_i = pp._online_softmax_update(s, v, acc, m_i, l_i, DOT_PRECISION, True)
    rows = (q_rows * num_q_heads + heads) * num_splits + split
    tl.store(part_max_ptr + rows, m_i, mask=mask_m)
    live = mask_m & (m_i > float("-inf"))
    tl.store(part_sum_ptr + rows, l_i, mask=live)
    tl.store(part_acc_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=live[:, None])


class DenseSplit:
    """Our split loop on dense K/V [L, Hkv, D] of every layer, with its partials and TMA descriptors
    built once, outside any CUDA-graph capture (a capture may not copy host data to the device)."""

    def __init__(self, case, splits, block_n, use_tma, stages, num_warps=4):
        q = case.q
        rows, hq, d = q.shape
        self.case, self.splits, self.block_n = case, splits, block_n
        self.use_tma, self.stages, self.num_warps = use_tma, stages, num_warps
        self.part_acc = torch.empty(rows, hq, splits, d, dtype=torch.float32, device=q.device)
        self.part_max = torch.empty(rows, hq, splits, dtype=torch.float32, device=q.device)
        self.part_sum = torch.empty_like(self.part_max)
        self.descs = []
        for k, v in case.dense:
            k2, v2 = k.view(k.shape[0], -1), v.view(v.shape[0], -1)
            self.descs.append((TensorDescriptor(k2, list(k2.shape), list(k2.stride()), [block_n, d]),
                               TensorDescriptor(v2, list(v2.shape), list(v2.stride()), [block_n, d])))

    def __call__(self, layer, merge=True):
        case, q, out = self.case, self.case.q, self.case.out
        rows, hq, d = q.shape
        k, v = case.dense[layer]
        k_desc, v_desc = self.descs[layer]
        seq_len, hkv = k.shape[0], k.shape[1]
        gqa_pad = triton.next_power_of_2(hq // hkv)
        block_m = 64
        num_q_tiles = triton.cdiv(rows, block_m // gqa_pad)
        _dense_split_kernel[(num_q_tiles * hkv * self.splits,)](
            q, k_desc, v_desc, k, v, self.part_acc, self.part_max, self.part_sum,
            (d ** -0.5) * LOG2E, case.new, seq_len, hq, hkv, self.splits, num_q_tiles,
            q.stride(0), q.stride(1), k.stride(0),
            GQA=hq // hkv, GQA_PAD=gqa_pad, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=self.block_n,
            USE_TMA=self.use_tma, STAGES=self.stages,
            DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            num_warps=self.num_warps, num_stages=self.stages,
        )
        if merge:
            self.merge(out)
        return out

    def merge(self, out):
        q = self.case.q
        rows, hq, d = q.shape
        heads = min(pp.MERGE_HEADS, triton.next_power_of_2(hq))
        block_s = triton.next_power_of_2(self.splits)
        pp._prefill_merge_kernel[(rows, triton.cdiv(hq, heads))](
            self.part_acc, self.part_max, self.part_sum, self.case.cu, out, 1, hq, self.splits,
            out.stride(0), out.stride(1), HEAD_DIM=d, BLOCK_S=block_s, HEADS=heads,
            num_warps=8 if heads * block_s * d > 4096 else 4,
        )
        return out


class Case:
    def __init__(self, device, dtype, layers, new=NEW, cached=CACHED):
        self.new, self.seq_len, self.layers = new, new + cached, layers
        g = torch.Generator(device="cpu").manual_seed(0)
        L = self.seq_len
        self.dense = [(torch.randn(L, HKV, D, generator=g).to(device, dtype),
                       torch.randn(L, HKV, D, generator=g).to(device, dtype)) for _ in range(layers)]
        blocks = triton.cdiv(L, BS)
        self.perm = torch.randperm(blocks + 1, generator=g)[:blocks]
        self.paged = []
        for k, v in self.dense:  # the same keys, scattered over a pool by the block table
            kc = torch.zeros(blocks + 1, BS, HKV, D, device=device, dtype=dtype)
            vc = torch.zeros_like(kc)
            kp = torch.zeros(blocks * BS, HKV, D, device=device, dtype=dtype)
            vp = torch.zeros_like(kp)
            kp[:L], vp[:L] = k, v
            kc[self.perm.to(device)] = kp.view(blocks, BS, HKV, D)
            vc[self.perm.to(device)] = vp.view(blocks, BS, HKV, D)
            self.paged.append((kc, vc))
        self.bt_random = self.perm.view(1, blocks).int().to(device)
        self.rows = 64  # PrefillGraphs' size for a 50-token turn
        self.q = torch.randn(self.rows, HQ, D, generator=g).to(device, dtype)
        self.out = torch.empty_like(self.q)
        self.cu = torch.tensor([0, new], dtype=torch.int32, device=device)
        self.seq_lens = torch.tensor([L], dtype=torch.int32, device=device)
        self.scale = D ** -0.5
        k0, v0 = self.dense[0]
        qs = self.q[:new].float().transpose(0, 1)  # [Hq, new, D]
        kk = k0.float().transpose(0, 1).repeat_interleave(GQA, 0)
        vv = v0.float().transpose(0, 1).repeat_interleave(GQA, 0)
        visible = torch.arange(L, device=device)[None, :] <= torch.arange(cached, L, device=device)[:, None]
        self.ref = torch.nn.functional.scaled_dot_product_attention(qs, kk, vv, attn_mask=visible,
                                                                     scale=self.scale).transpose(0, 1)

    def err(self, out):
        return ((out[: self.new].float() - self.ref).norm() / self.ref.norm()).item()


def timed(case, call, layers):
    """Median us per call of a CUDA graph of `layers` calls, call(layer)."""
    call(0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for layer in range(layers):
            call(layer)
    return triton.testing.do_bench(graph.replay, warmup=10, rep=60, return_mode="median") * 1e3 / layers


def variants(case, on_gpu):
    """(name, call(layer) -> out [>= new rows, Hq, D])."""
    out = case.out
    v = []

    def ours(bt, **kw):
        def call(layer):
            k, vv = case.paged[layer]
            return pp.paged_attention_prefill_split(case.q, k, vv, bt, case.cu, case.seq_lens, case.scale,
                                                    case.rows, out=out, max_seq_len=8192, **kw)
        return call

    bt_seq = torch.arange(case.bt_random.shape[1], dtype=torch.int32, device=case.q.device).view(1, -1)
    v.append(("ours (engine default)", ours(case.bt_random)))
    if on_gpu:
        # Work against the turn's length: a 64-row tile holds 16 tokens x 4 heads, so 50 tokens take
        # four tiles and the fourth computes 64 rows for 8. Same keys before the new tokens, same graph shape.
        for new in (16, 32, 48, 49, 64):
            cu = torch.tensor([0, new], dtype=torch.int32, device=case.q.device)
            lens = torch.tensor([case.seq_len - case.new + new], dtype=torch.int32, device=case.q.device)

            def call(layer, cu=cu, lens=lens):
                k, vv = case.paged[layer]
                return pp.paged_attention_prefill_split(case.q, k, vv, case.bt_random, cu, lens, case.scale,
                                                        case.rows, out=out, max_seq_len=8192)
            v.append((f"  ours, {new} new tokens (timing only)", call))
        consecutive = []
        for k, vv in case.dense:  # the same keys at block ids 0, 1, 2, ...
            blocks = case.bt_random.shape[1]
            kc = torch.zeros(blocks + 1, BS, HKV, D, device=k.device, dtype=k.dtype)
            vc = torch.zeros_like(kc)
            kc.view(-1, HKV, D)[: case.seq_len], vc.view(-1, HKV, D)[: case.seq_len] = k, vv
            consecutive.append((kc, vc))

        def ours_consecutive(layer):
            k, vv = consecutive[layer]
            return pp.paged_attention_prefill_split(case.q, k, vv, bt_seq, case.cu, case.seq_lens, case.scale,
                                                    case.rows, out=out, max_seq_len=8192)
        v.append(("ours consecutive blocks", ours_consecutive))
    for splits in (4, 8):
        for bn in (64, 128):
            for use_tma, stages in ((True, 2), (True, 3), (False, 2), (False, 3)):
                if bn == 128 and stages == 3:
                    continue  # 2 x 3 x 32 KB of K/V tiles: past the shared memory
                if not on_gpu and use_tma:
                    continue  # the interpreter has no TMA
                dense = DenseSplit(case, splits, bn, use_tma, stages)
                v.append((f"dense {'tma' if use_tma else 'ptr'} bn={bn} st={stages} s={splits}", dense))
                if splits == 8 and bn == 64 and use_tma and stages == 2:
                    # The merge's share: the split loop alone, and the merge alone on its partials.
                    v.append(("  same, split loop only", lambda layer, dense=dense: dense(layer, merge=False)))
                    v.append(("  same, merge only", lambda layer, dense=dense: dense.merge(out)))
    if on_gpu:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right

        q4 = case.q[: case.new].transpose(0, 1).unsqueeze(0).contiguous()  # [1, Hq, new, D]
        dense4 = [(k.permute(1, 0, 2).unsqueeze(0).contiguous(), vv.permute(1, 0, 2).unsqueeze(0).contiguous())
                  for k, vv in case.dense]  # [1, Hkv, L, D]
        expanded = [(k.repeat_interleave(GQA, 1), vv.repeat_interleave(GQA, 1)) for k, vv in dense4]
        mask = causal_lower_right(case.new, case.seq_len)
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            for gqa_mode in ("native", "expanded"):
                for masked in (True, False):
                    def call(layer, backend=backend, gqa_mode=gqa_mode, masked=masked):
                        k, vv = (dense4 if gqa_mode == "native" else expanded)[layer]
                        with sdpa_kernel([backend]):
                            o = torch.nn.functional.scaled_dot_product_attention(
                                q4, k, vv, attn_mask=mask if masked else None, scale=case.scale,
                                enable_gqa=gqa_mode == "native")
                        return o[0].transpose(0, 1)
                    v.append((f"torch {backend.name.lower()} {gqa_mode}{' causal' if masked else ' nomask'}", call))
    return v


def main():
    if not torch.cuda.is_available():  # the interpreter's NumPy >= 2.4 fix, as the tests apply it
        sys.path.insert(0, "tests/kernels")
        from conftest_interpreter import patch_interpreter_for_numpy_2_4
        patch_interpreter_for_numpy_2_4()
    on_gpu = torch.cuda.is_available() and "--check" not in sys.argv
    device = "cuda" if on_gpu else "cpu"
    dtype = torch.bfloat16 if on_gpu else torch.float32
    layers = LAYERS if on_gpu else 1
    case = Case(device, dtype, layers, *((NEW, CACHED) if on_gpu else (10, 200)))
    if on_gpu:
        print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    kv_bytes = 2 * case.seq_len * HKV * D * (2 if on_gpu else 4)
    flops = 4 * HQ * D * (case.new * (case.seq_len - case.new) + case.new * (case.new + 1) // 2)
    print(f"{case.new} queries after {case.seq_len - case.new} keys; K+V {kv_bytes / 1e6:.1f} MB, "
          f"{flops / 1e9:.2f} GFLOP a layer; us = per call in a graph of {layers} calls over {layers} layers")
    print(f"{'variant':>40} {'err':>9} {'us':>7} {'TB/s':>6} {'TFLOP/s':>8}")
    for name, call in variants(case, on_gpu):
        try:
            case.out.fill_(math.nan)
            out = call(0)
            if on_gpu:
                torch.cuda.synchronize()
            timing_only = "split loop only" in name or "timing only" in name  # partials only, or another shape
            err = math.nan if timing_only else case.err(out)
            if not on_gpu:
                print(f"{name:>40} {err:9.2e}", flush=True)
                assert err < 1e-4, name
                continue
            us = timed(case, call, layers)
            print(f"{name:>40} {err:9.2e} {us:7.2f} {kv_bytes / us / 1e6:6.2f} {flops / us / 1e6:8.1f}", flush=True)
        except Exception as exc:  # a backend that refuses the shape: say so and go on
            print(f"{name:>40} {type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}", flush=True)
            if not on_gpu:
                raise


if __name__ == "__main__":
    main()
