"""kv_cache_dtype="fp8": an e4m3 KV cache written quantized and read by the attention paths themselves,
with one scale for K and one for V per layer."""
import pytest
import torch

import kernels
from inference import LLM, SamplingParams
from inference.attention import AttentionMetadata, StepContext
from inference.quantization.fp8 import FP8_DTYPE
from kernels.kv_cache_write import write_kv_cache_ref

NUM_BLOCKS, BLOCK_SIZE, HKV, HQ, D = 37, 16, 2, 4, 32


def test_kv_round_trips_within_e4m3_precision():
    torch.manual_seed(3)
    n = 50
    k = torch.randn(n, HKV, D) * 3
    v = torch.randn(n, HKV, D) * 0.01
    k_scale, v_scale = torch.tensor([0.05]), torch.tensor([1.0])
    k_cache = torch.zeros(NUM_BLOCKS, BLOCK_SIZE, HKV, D, dtype=FP8_DTYPE)
    v_cache = torch.zeros_like(k_cache)
    slots = torch.randperm(NUM_BLOCKS * BLOCK_SIZE)[:n]
    slots[7] = -1  # padding: not written
    write_kv_cache_ref(k, v, k_cache, v_cache, slots, k_scale, v_scale)
    for i, slot in enumerate(slots.tolist()):
        if slot < 0:
            continue
        got_k = k_cache.view(-1, HKV, D)[slot].float() * k_scale
        got_v = v_cache.view(-1, HKV, D)[slot].float() * v_scale
        # 3 mantissa bits: relative error <= 2^-4; below e4m3's smallest normal (2^-6), steps of 2^-9
        assert ((got_k - k[i]).abs() <= k[i].abs() * 2 ** -4 + k_scale * 2 ** -10).all()
        assert ((got_v - v[i]).abs() <= v[i].abs() * 2 ** -4 + v_scale * 2 ** -10).all()
    written = set(slots.tolist())
    untouched = [s for s in range(NUM_BLOCKS * BLOCK_SIZE) if s not in written]
    assert (k_cache.view(-1, HKV, D)[untouched].float() == 0).all()


def test_kv_saturates_instead_of_overflowing():
    k = torch.full((1, HKV, D), 1e6)
    k_cache = torch.zeros(2, BLOCK_SIZE, HKV, D, dtype=FP8_DTYPE)
    one = torch.ones(1)
    write_kv_cache_ref(k, -k, k_cache, k_cache.clone(), torch.tensor([3]), one, one)
    assert (k_cache.view(-1, HKV, D)[3].float() == 448).all()


def _meta(seq_lens, q_lens, tables):
    cu = [0]
    for n in q_lens:
        cu.append(cu[-1] + n)
    slots = []
    for b, (L, n) in enumerate(zip(seq_lens, q_lens)):
        slots += [tables[b][p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE for p in range(L - n, L)]
    return AttentionMetadata(
        slot_mapping=torch.tensor(slots), block_tables=torch.tensor(tables, dtype=torch.int32),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32), cu_seqlens_q=torch.tensor(cu, dtype=torch.int32),
        max_q_len=max(q_lens), max_seq_len=max(seq_lens), decode_only=max(q_lens) == 1)


@pytest.mark.parametrize("q_lens", [[1, 1, 1], [5, 1, 17]])
def test_fp8_attention_equals_attention_over_the_e4m3_values(q_lens):
    """With K/V that e4m3 holds exactly (already rounded, scales powers of two), attention over the
    e4m3 caches with their scales equals attention over float caches of the same values: the only
    difference FP8 makes is the rounding of what is stored."""
    torch.manual_seed(4)
    k_scale, v_scale = 0.5, 2.0
    seq_lens = [40, 9, 33]
    perm = torch.randperm(NUM_BLOCKS).tolist()
    tables = [perm[0:3], perm[3:6], perm[6:9]]
    meta = _meta(seq_lens, q_lens, tables)
    past = torch.randn(NUM_BLOCKS, BLOCK_SIZE, HKV, D).to(FP8_DTYPE)  # the earlier tokens' K/V, as stored
    caches_fp8 = [(past.clone(), past.clone())]
    caches_ref = [(past.float() * k_scale, past.float() * v_scale)]
    n = sum(q_lens)
    positions = torch.cat([torch.arange(L - q, L) for L, q in zip(seq_lens, q_lens)])
    cos_sin = kernels.build_cos_sin_cache(D, 64, 10000.0, None)
    q = torch.randn(n, HQ, D)
    # K is rotated before it is stored; pick K whose rotation e4m3 holds exactly: rotate, round, unrotate
    k_rot = torch.randn(n, HKV, D).to(FP8_DTYPE).float() * k_scale
    half = D // 2
    cs = cos_sin[positions]
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    k1, k2 = k_rot[..., :half], k_rot[..., half:]
    k = torch.cat([k1 * cos + k2 * sin, k2 * cos - k1 * sin], dim=-1)  # the inverse rotation
    v = torch.randn(n, HKV, D).to(FP8_DTYPE).float() * v_scale
    scales = torch.tensor([[k_scale, v_scale]])
    out_fp8 = StepContext(caches_fp8, meta, cos_sin, D ** -0.5, kv_scales=scales).attention(
        0, q.clone(), k.clone(), v.clone(), positions)
    out_ref = StepContext(caches_ref, meta, cos_sin, D ** -0.5).attention(0, q.clone(), k.clone(), v.clone(),
                                                                           positions)
    torch.testing.assert_close(out_fp8, out_ref, atol=2e-5, rtol=1e-4)
    assert out_fp8.abs().max() > 0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_model_factory):
    return tiny_model_factory(tmp_path_factory.mktemp("fp8-kv"), "llama")


def test_fp8_kv_holds_twice_the_blocks_of_bf16_in_the_same_memory(tiny):
    memory = 8 * 1024 ** 2
    blocks = {}
    for kv in ("auto", "fp8"):
        llm = LLM(model=str(tiny), progress=False, device="cpu", dtype="bfloat16", kv_cache_dtype=kv,
                  cpu_kv_cache_bytes=memory)
        runner = llm.engine.runner
        blocks[kv] = runner.num_blocks
        assert runner.kv_cache.numel() * runner.kv_cache.element_size() <= memory
    assert blocks["fp8"] == 2 * blocks["auto"]
    assert runner.kv_cache.dtype == FP8_DTYPE


class _DequantizedCopyContext(StepContext):
    """The reference read of an e4m3 pool: dequantize the whole cache into the model's dtype, then
    attend over that float copy with the plain (scale-free) path."""

    def attention(self, layer_idx, q, k, v, positions):
        k_cache, v_cache = self.kv_caches[layer_idx]
        k_scale, v_scale = self.kv_scales[layer_idx, 0:1], self.kv_scales[layer_idx, 1:2]
        q_new, k_new = kernels.apply_rotary_ref(q, k, positions, self.cos_sin_cache)
        q.copy_(q_new)
        k.copy_(k_new)
        write_kv_cache_ref(k, v, k_cache, v_cache, self.meta.slot_mapping, k_scale, v_scale)
        k_read = k_cache.to(q.dtype) * k_scale.to(q.dtype)
        v_read = v_cache.to(q.dtype) * v_scale.to(q.dtype)
        return self.attend(q, k_read, v_read, self.meta.block_tables, self.windows[layer_idx])


def test_engine_with_fp8_kv_generates_the_dequantized_copy_tokens_and_frees_every_block(tiny):
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    prompts = ["Once upon a time", "The capital of France is", "A" * 80]
    ref = LLM(model=str(tiny), progress=False, device="cpu", num_kv_blocks=64, kv_cache_dtype="fp8")
    runner = ref.engine.runner
    runner.kv_scales[:, 0], runner.kv_scales[:, 1] = 0.25, 4.0  # scales != 1, as calibrated ones would be
    runner.step_context = lambda meta: _DequantizedCopyContext(
        runner.kv_caches, meta, runner.cos_sin_cache, runner.scale, runner.layer_windows, runner.kv_scales)
    want = [o.outputs[0].token_ids for o in ref.generate(prompts, params)]
    llm = LLM(model=str(tiny), progress=False, device="cpu", num_kv_blocks=64, kv_cache_dtype="fp8")
    llm.engine.runner.kv_scales.copy_(runner.kv_scales)
    outs = llm.generate(prompts, params)
    assert [len(o.outputs[0].token_ids) for o in outs] == [10, 10, 10]
    assert [o.outputs[0].token_ids for o in outs] == want
    pool = llm.engine.block_manager.pool
    assert pool.num_used == 0
