import math

import pytest
import torch
from kernel_testing import DEVICE, DTYPES

from kernels.kv_cache_write import write_kv_cache, write_kv_cache_ref


def _inputs(num_tokens, num_blocks, block_size, num_kv_heads, head_dim, dtype, device, first_block=0):
    """Fused-projection-like key/value views (token stride > Hkv * D), unique slots, some padding."""
    fused = torch.randn(num_tokens, 3, num_kv_heads, head_dim, dtype=dtype, device=device)
    key, value = fused[:, 0], fused[:, 2]
    num_slots = (num_blocks - first_block) * block_size
    slots = first_block * block_size + torch.randperm(num_slots)[:num_tokens]
    slots[::5] = -1  # padding tokens
    return key, value, slots.to(device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "block_size, num_kv_heads, head_dim",
    [(16, 1, 64), (16, 3, 64), (32, 8, 128), (8, 2, 128), (16, 5, 80)],
)
def test_write_matches_ref(dtype, block_size, num_kv_heads, head_dim, device):
    num_blocks = 9
    key, value, slots = _inputs(37, num_blocks, block_size, num_kv_heads, head_dim, dtype, device)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(shape, math.nan, dtype=dtype, device=device)
    v_cache = torch.full(shape, math.nan, dtype=dtype, device=device)
    k_ref, v_ref = k_cache.clone(), v_cache.clone()

    write_kv_cache(key, value, k_cache, v_cache, slots)
    write_kv_cache_ref(key, value, k_ref, v_ref, slots)

    torch.testing.assert_close(k_cache, k_ref, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(v_cache, v_ref, rtol=0, atol=0, equal_nan=True)
    keep = slots >= 0
    flat_k = k_cache.view(-1, num_kv_heads, head_dim)
    assert torch.equal(flat_k[slots[keep]], key[keep])  # independent of the ref
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool, device=device)
    untouched[slots[keep]] = False
    assert flat_k[untouched].isnan().all(), "padding tokens or stray writes touched other slots"


def test_write_top_of_huge_pool(huge_pool):
    """Slots whose element offsets pass 2**31 (slot * Hkv * D)."""
    k_cache, v_cache = huge_pool
    num_blocks, block_size, num_kv_heads, head_dim = k_cache.shape
    first = num_blocks - 3
    key, value, slots = _inputs(20, num_blocks, block_size, num_kv_heads, head_dim, k_cache.dtype, DEVICE, first)
    assert int(slots.max()) * num_kv_heads * head_dim > 2**31
    write_kv_cache(key, value, k_cache, v_cache, slots)
    keep = slots >= 0
    assert torch.equal(k_cache.view(-1, num_kv_heads, head_dim)[slots[keep]], key[keep])
    assert torch.equal(v_cache.view(-1, num_kv_heads, head_dim)[slots[keep]], value[keep])


def test_write_rejects_bad_inputs(device):
    key, value, slots = _inputs(4, 2, 16, 2, 64, torch.float32, device)
    k_cache = torch.zeros(2, 16, 2, 64, device=device)
    v_cache = torch.zeros_like(k_cache)
    with pytest.raises(TypeError, match="slot_mapping"):
        write_kv_cache(key, value, k_cache, v_cache, slots.int())
    with pytest.raises(TypeError, match="key"):
        write_kv_cache(key.half(), value, k_cache, v_cache, slots)
    with pytest.raises(ValueError, match="value"):
        write_kv_cache(key, value[:, :1], k_cache, v_cache, slots)
    with pytest.raises(ValueError, match="contiguous"):
        write_kv_cache(key, value, k_cache.transpose(1, 2), v_cache.transpose(1, 2), slots)
    with pytest.raises(ValueError, match="stride 1"):
        write_kv_cache(key, value.transpose(1, 2).contiguous().transpose(1, 2), k_cache, v_cache, slots)
