"""The paged KV cache write's torch reference (the engine's CPU path) and checks. On the GPU the write
runs fused with RoPE; test_kernel_rotary.py checks that kernel against this reference."""
import math

import pytest
import torch
from kernel_testing import DEVICE

from kernels.rotary import apply_rotary_and_write_kv, build_cos_sin_cache
from kernels.kv_cache_write import write_kv_cache_ref


def _inputs(num_tokens, num_blocks, block_size, num_kv_heads, head_dim, dtype, device, first_block=0):
    """Fused-projection-like key/value views (token stride > Hkv * D), unique slots, some padding."""
    fused = torch.randn(num_tokens, 3, num_kv_heads, head_dim, dtype=dtype, device=device)
    key, value = fused[:, 0], fused[:, 2]
    num_slots = (num_blocks - first_block) * block_size
    slots = first_block * block_size + torch.randperm(num_slots)[:num_tokens]
    slots[::5] = -1  # padding tokens
    return key, value, slots.to(device)


@pytest.mark.parametrize("block_size, num_kv_heads, head_dim", [(16, 1, 64), (16, 3, 64), (8, 2, 128), (16, 5, 80)])
def test_ref_writes_only_its_slots(block_size, num_kv_heads, head_dim):
    num_blocks = 9
    key, value, slots = _inputs(37, num_blocks, block_size, num_kv_heads, head_dim, torch.float32, "cpu")
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(shape, math.nan)
    v_cache = torch.full(shape, math.nan)
    write_kv_cache_ref(key, value, k_cache, v_cache, slots)
    keep = slots >= 0
    flat_k, flat_v = k_cache.view(-1, num_kv_heads, head_dim), v_cache.view(-1, num_kv_heads, head_dim)
    for i in keep.nonzero().flatten().tolist():
        assert torch.equal(flat_k[slots[i]], key[i]) and torch.equal(flat_v[slots[i]], value[i])
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool)
    untouched[slots[keep]] = False
    assert flat_k[untouched].isnan().all() and flat_v[untouched].isnan().all(), "padding or stray writes"


def test_fused_write_top_of_huge_pool(huge_pool):
    """Slots whose element offsets pass 2**31 (slot * Hkv * D), written by the fused rotate-and-write."""
    k_cache, v_cache = huge_pool
    num_blocks, block_size, num_kv_heads, head_dim = k_cache.shape
    key, value, slots = _inputs(20, num_blocks, block_size, num_kv_heads, head_dim, k_cache.dtype, DEVICE,
                                num_blocks - 3)
    assert int(slots.max()) * num_kv_heads * head_dim > 2**31
    q = torch.randn(20, num_kv_heads, head_dim, dtype=k_cache.dtype, device=DEVICE)
    positions = torch.zeros(20, dtype=torch.int64, device=DEVICE)  # position 0 rotates by nothing
    cos_sin = build_cos_sin_cache(head_dim, 8, 10000.0, None).to(DEVICE)
    apply_rotary_and_write_kv(q, key, value, positions, cos_sin, k_cache, v_cache, slots)
    keep = slots >= 0
    assert torch.equal(k_cache.view(-1, num_kv_heads, head_dim)[slots[keep]], key[keep])
    assert torch.equal(v_cache.view(-1, num_kv_heads, head_dim)[slots[keep]], value[keep])


def test_write_checks_reject_bad_inputs():
    from kernels.kv_cache_write import check_kv_write_inputs

    key, value, slots = _inputs(4, 2, 16, 2, 64, torch.float32, "cpu")
    k_cache = torch.zeros(2, 16, 2, 64)
    v_cache = torch.zeros_like(k_cache)
    with pytest.raises(TypeError, match="slot_mapping"):
        check_kv_write_inputs(key, value, k_cache, v_cache, slots.int())
    with pytest.raises(TypeError, match="key"):
        check_kv_write_inputs(key.half(), value, k_cache, v_cache, slots)
    with pytest.raises(ValueError, match="value"):
        check_kv_write_inputs(key, value[:, :1], k_cache, v_cache, slots)
    with pytest.raises(ValueError, match="contiguous"):
        check_kv_write_inputs(key, value, k_cache.transpose(1, 2), v_cache.transpose(1, 2), slots)
    with pytest.raises(ValueError, match="stride 1"):
        check_kv_write_inputs(key, value.transpose(1, 2).contiguous().transpose(1, 2), k_cache, v_cache, slots)


def test_ref_writes_e4m3_with_scales():
    """An e4m3 cache stores e4m3(x / scale), saturated at +-448; read back times the scale, it is x
    within e4m3's precision (relative error <= 2^-4)."""
    from kernels.kv_cache_write import quantize_kv_ref

    key, value, slots = _inputs(37, 9, 16, 2, 64, torch.bfloat16, "cpu")
    value[1, 0, :3] = -3000.0  # past 448 * v_scale
    k_scale, v_scale = torch.tensor([0.02]), torch.tensor([2.0])
    k_cache = torch.zeros(9, 16, 2, 64).to(torch.float8_e4m3fn)
    v_cache = torch.zeros_like(k_cache)
    write_kv_cache_ref(key, value, k_cache, v_cache, slots, k_scale, v_scale)
    keep = slots >= 0
    got_k = k_cache.view(-1, 2, 64)[slots[keep]].float() * 0.02
    want = key[keep].float()
    big = want.abs() > 0.02 * 2**-6
    assert ((got_k - want).abs()[big] <= want.abs()[big] / 16).all()
    got_v = v_cache.view(-1, 2, 64)[slots[keep]]
    assert torch.equal(got_v.view(torch.uint8), quantize_kv_ref(value[keep], v_scale).view(torch.uint8))
    assert (v_cache.view(-1, 2, 64)[slots[1], 0, :3].float() == -448.0).all()
    untouched = torch.ones(9 * 16, dtype=torch.bool)
    untouched[slots[keep]] = False
    assert (k_cache.view(-1, 2, 64)[untouched].float() == 0).all()
