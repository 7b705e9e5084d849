import pytest
import torch
from kernel_testing import DEVICE, DTYPES, assert_close

from kernels.kv_cache_write import quantize_kv_ref
from kernels.rotary import (
    apply_rotary,
    apply_rotary_and_write_kv,
    apply_rotary_and_write_kv_ref,
    apply_rotary_ref,
    build_cos_sin_cache,
    rope_inv_freq,
)

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
SCALINGS = [None, {"rope_type": "linear", "factor": 4.0}, LLAMA3]


def _hf_rotary(head_dim: int, base: float, rope_scaling: dict | None):
    modeling_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    params = {"rope_type": "default"} if rope_scaling is None else dict(rope_scaling)
    params["rope_theta"] = base
    config = LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=16384,
        rope_parameters=params,
    )
    return config, modeling_llama.LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("rope_scaling", SCALINGS, ids=["default", "linear", "llama3"])
@pytest.mark.parametrize("head_dim, base", [(64, 10000.0), (128, 500000.0)])
def test_inv_freq_matches_transformers(rope_scaling, head_dim, base):
    config, rotary = _hf_rotary(head_dim, base, rope_scaling)
    ours = rope_inv_freq(head_dim, base, rope_scaling)
    torch.testing.assert_close(ours, rotary.inv_freq.float(), rtol=0, atol=0)
    if rope_scaling is not None:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        hf_inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[rope_scaling["rope_type"]](config, "cpu")
        torch.testing.assert_close(ours, hf_inv_freq, rtol=0, atol=0)
        assert attention_factor == 1.0  # the cache has no room for a cos/sin scale


@pytest.mark.parametrize("rope_scaling", SCALINGS, ids=["default", "linear", "llama3"])
def test_cos_sin_cache_matches_transformers(rope_scaling):
    head_dim, max_pos = 64, 9000
    _, rotary = _hf_rotary(head_dim, 500000.0, rope_scaling)
    cache = build_cos_sin_cache(head_dim, max_pos, 500000.0, rope_scaling)
    assert cache.shape == (max_pos, head_dim) and cache.dtype == torch.float32
    positions = torch.arange(max_pos)[None]
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), positions)  # [1, max_pos, D]
    torch.testing.assert_close(cache[:, : head_dim // 2], cos[0, :, : head_dim // 2], rtol=0, atol=1e-6)
    torch.testing.assert_close(cache[:, head_dim // 2 :], sin[0, :, : head_dim // 2], rtol=0, atol=1e-6)


def test_unknown_rope_type_is_rejected():
    with pytest.raises(ValueError, match="yarn"):
        build_cos_sin_cache(64, 16, 10000.0, {"rope_type": "yarn", "factor": 2.0})


def _qk(num_tokens, num_q_heads, num_kv_heads, head_dim, dtype):
    """q and k as views into one fused qkv tensor (token stride (Hq + 2 Hkv) * D)."""
    qkv = torch.randn(num_tokens, num_q_heads + 2 * num_kv_heads, head_dim, dtype=dtype, device=DEVICE)
    return qkv[:, :num_q_heads], qkv[:, num_q_heads : num_q_heads + num_kv_heads]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_q_heads, num_kv_heads, head_dim", [(9, 3, 64), (32, 8, 128), (4, 4, 64), (6, 2, 96)])
def test_apply_rotary_matches_ref(dtype, num_q_heads, num_kv_heads, head_dim):
    max_pos = 5000
    cache = build_cos_sin_cache(head_dim, max_pos, 10000.0, LLAMA3).to(DEVICE)
    q, k = _qk(37, num_q_heads, num_kv_heads, head_dim, dtype)
    positions = torch.randint(0, max_pos, (37,), device=DEVICE)
    positions[:3] = torch.tensor([0, 1, max_pos - 1])
    q_ref, k_ref = apply_rotary_ref(q, k, positions, cache)
    apply_rotary(q, k, positions, cache)
    assert_close(q, q_ref, dtype)
    assert_close(k, k_ref, dtype)


def test_apply_rotary_ref_matches_transformers():
    modeling_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    head_dim = 64
    _, rotary = _hf_rotary(head_dim, 10000.0, LLAMA3)
    cache = build_cos_sin_cache(head_dim, 3000, 10000.0, LLAMA3)
    positions = torch.randint(0, 3000, (11,))
    q, k = torch.randn(11, 6, head_dim), torch.randn(11, 2, head_dim)
    cos, sin = rotary(q, positions[None])  # [1, N, D]
    # HF layout is [batch, heads, seq, D]: treat our tokens as the sequence of one batch.
    q_hf, k_hf = modeling_llama.apply_rotary_pos_emb(q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin)
    q_ref, k_ref = apply_rotary_ref(q, k, positions, cache)
    torch.testing.assert_close(q_ref, q_hf[0].transpose(0, 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_ref, k_hf[0].transpose(0, 1), rtol=1e-5, atol=1e-5)


def test_apply_rotary_rejects_bad_inputs():
    cache = build_cos_sin_cache(64, 100, 10000.0, None).to(DEVICE)
    q, k = _qk(4, 4, 2, 64, torch.float32)
    positions = torch.arange(4, device=DEVICE)
    with pytest.raises(TypeError, match="positions"):
        apply_rotary(q, k, positions.int(), cache)
    with pytest.raises(TypeError, match="cos_sin_cache"):
        apply_rotary(q, k, positions, cache.half())
    with pytest.raises(ValueError, match="cos_sin_cache"):
        apply_rotary(q, k, positions, cache[:, :32])
    with pytest.raises(ValueError, match="k"):
        apply_rotary(q, k[:2], positions, cache)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_q_heads, num_kv_heads, head_dim", [(9, 3, 64), (32, 8, 128), (6, 2, 96)])
def test_rotary_and_write_kv_is_rotary_then_cache_write(dtype, num_q_heads, num_kv_heads, head_dim):
    """The fused kernel equals apply_rotary followed by a cache write: q and k rotated in place, the
    rotated k and v in their slots, padding rows (slot -1) and every other slot untouched."""
    num_tokens, block_size, num_blocks = 21, 16, 5
    cache = build_cos_sin_cache(head_dim, 4000, 10000.0, LLAMA3).to(DEVICE)
    qkv = torch.randn(num_tokens, num_q_heads + 2 * num_kv_heads, head_dim, dtype=dtype, device=DEVICE)
    q, k = qkv[:, :num_q_heads], qkv[:, num_q_heads : num_q_heads + num_kv_heads]
    v = qkv[:, num_q_heads + num_kv_heads :]
    positions = torch.randint(0, 4000, (num_tokens,), device=DEVICE)
    slots = torch.randperm(num_blocks * block_size, device=DEVICE)[:num_tokens]
    slots[[3, 11]] = -1
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(shape, 7.0, dtype=dtype, device=DEVICE)
    v_cache = torch.full(shape, 7.0, dtype=dtype, device=DEVICE)
    q_ref, k_ref = apply_rotary_ref(q, k, positions, cache)
    qkv_before, v_before = qkv.clone(), v.clone()

    apply_rotary_and_write_kv(q, k, v, positions, cache, k_cache, v_cache, slots)

    assert_close(q, q_ref, dtype)
    assert_close(k, k_ref, dtype)
    assert torch.equal(v, v_before)
    keep = slots >= 0
    flat_k, flat_v = k_cache.view(-1, num_kv_heads, head_dim), v_cache.view(-1, num_kv_heads, head_dim)
    assert torch.equal(flat_k[slots[keep]], k[keep])  # the rotated k, bit for bit
    assert torch.equal(flat_v[slots[keep]], v[keep])
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool, device=DEVICE)
    untouched[slots[keep]] = False
    assert (flat_k[untouched] == 7).all() and (flat_v[untouched] == 7).all()

    # The torch reference (the engine's CPU path) does the same, in place.
    qkv_ref = qkv_before.clone()
    q_r, k_r = qkv_ref[:, :num_q_heads], qkv_ref[:, num_q_heads : num_q_heads + num_kv_heads]
    k_cache_r, v_cache_r = torch.full_like(k_cache, 7.0), torch.full_like(v_cache, 7.0)
    apply_rotary_and_write_kv_ref(q_r, k_r, qkv_ref[:, num_q_heads + num_kv_heads :], positions, cache, k_cache_r,
                                  v_cache_r, slots)
    assert_close(qkv_ref, qkv, dtype)
    assert_close(k_cache_r, k_cache, dtype)
    assert torch.equal(v_cache_r, v_cache)


def test_rotary_and_write_kv_rejects_bad_inputs():
    cache = build_cos_sin_cache(64, 100, 10000.0, None).to(DEVICE)
    q, k = _qk(4, 4, 2, 64, torch.float32)
    v = torch.randn_like(k)
    positions = torch.arange(4, device=DEVICE)
    kv = torch.zeros(2, 16, 2, 64, device=DEVICE)
    slots = torch.arange(4, device=DEVICE)
    with pytest.raises(TypeError, match="slot_mapping"):
        apply_rotary_and_write_kv(q, k, v, positions, cache, kv, kv, slots.int())
    with pytest.raises(ValueError, match="k_cache"):
        apply_rotary_and_write_kv(q, k, v, positions, cache, kv[:, :, :1], kv[:, :, :1], slots)
    with pytest.raises(ValueError, match="v has shape"):
        apply_rotary_and_write_kv(q, k, v[:3], positions, cache, kv, kv, slots)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_q_heads, num_kv_heads, head_dim", [(9, 3, 64), (6, 2, 96)])
def test_rotary_and_write_kv_into_e4m3_cache(dtype, num_q_heads, num_kv_heads, head_dim):
    """An e4m3 cache: the kernel stores the rotated k and v divided by their scales, saturated at 448,
    byte for byte as the torch reference does; padding rows and other slots stay untouched."""
    num_tokens, block_size, num_blocks = 21, 16, 5
    cache = build_cos_sin_cache(head_dim, 4000, 10000.0, LLAMA3).to(DEVICE)
    qkv = 4 * torch.randn(num_tokens, num_q_heads + 2 * num_kv_heads, head_dim, dtype=dtype, device=DEVICE)
    qkv[0, -1, :4] = 1000.0  # v past 448 * v_scale: saturates
    positions = torch.randint(0, 4000, (num_tokens,), device=DEVICE)
    slots = torch.randperm(num_blocks * block_size, device=DEVICE)[:num_tokens]
    slots[[3, 11]] = -1
    k_scale = torch.tensor([0.05], device=DEVICE)
    v_scale = torch.tensor([0.5], device=DEVICE)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    caches = []
    for fn in (apply_rotary_and_write_kv, apply_rotary_and_write_kv_ref):
        x = qkv.clone()
        q, k, v = x[:, :num_q_heads], x[:, num_q_heads:num_q_heads + num_kv_heads], x[:, num_q_heads + num_kv_heads:]
        k_cache = torch.full(shape, 7.0, device=DEVICE).to(torch.float8_e4m3fn)
        v_cache = torch.full(shape, 7.0, device=DEVICE).to(torch.float8_e4m3fn)
        fn(q, k, v, positions, cache, k_cache, v_cache, slots, k_scale, v_scale)
        caches.append((x, k_cache, v_cache, k))
    (x, k_cache, v_cache, k), (x_r, k_cache_r, v_cache_r, _) = caches
    assert_close(x, x_r, dtype)
    keep = slots >= 0
    # The kernel's stored k is its rotated k quantized, byte for byte (the reference's rotation may
    # differ by an ulp, which can move an e4m3 rounding: hence against the kernel's own k).
    stored_k = k_cache.view(torch.uint8).view(-1, num_kv_heads, head_dim)[slots[keep]]
    assert torch.equal(stored_k, quantize_kv_ref(k[keep], k_scale).view(torch.uint8))
    assert torch.equal(v_cache.view(torch.uint8), v_cache_r.view(torch.uint8))
    torch.testing.assert_close(k_cache.float(), k_cache_r.float(), atol=2**-9, rtol=2**-3)  # one e4m3 step
    flat_k = k_cache.view(-1, num_kv_heads, head_dim).float()
    flat_v = v_cache.view(-1, num_kv_heads, head_dim).float()
    v = qkv[:, num_q_heads + num_kv_heads:].float()
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 (above its subnormals)
    big = k[keep].float().abs() > 0.05 * 2**-6
    assert ((flat_k[slots[keep]] * 0.05 - k[keep].float()).abs()[big] <= k[keep].float().abs()[big] / 16).all()
    assert flat_v[slots[0]][-1, :4].eq(448.0).all(), "not saturated"
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool, device=DEVICE)
    untouched[slots[keep]] = False
    assert (flat_k[untouched] == 7).all() and (flat_v[untouched] == 7).all()
    assert torch.isfinite(flat_v[slots[keep]]).all() and v.isfinite().all()


def test_rotary_and_write_kv_e4m3_needs_scales():
    cache = build_cos_sin_cache(64, 100, 10000.0, None).to(DEVICE)
    q, k = _qk(4, 4, 2, 64, torch.float32)
    v = torch.randn_like(k)
    positions = torch.arange(4, device=DEVICE)
    kv = torch.zeros(2, 16, 2, 64, device=DEVICE).to(torch.float8_e4m3fn)
    slots = torch.arange(4, device=DEVICE)
    one = torch.ones(1, device=DEVICE)
    with pytest.raises(ValueError, match="k_scale"):
        apply_rotary_and_write_kv(q, k, v, positions, cache, kv, kv, slots)
    with pytest.raises(TypeError, match="v_scale"):
        apply_rotary_and_write_kv(q, k, v, positions, cache, kv, kv, slots, one, one.half())
    with pytest.raises(ValueError, match="one element"):
        apply_rotary_and_write_kv(q, k, v, positions, cache, kv, kv, slots, torch.ones(2, device=DEVICE), one)
    with pytest.raises(ValueError, match="e4m3"):
        apply_rotary_and_write_kv(q, k, v, positions, cache, kv.float(), kv.float(), slots, one, one)
