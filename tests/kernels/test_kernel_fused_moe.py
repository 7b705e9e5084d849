import pytest
import torch
import torch.nn.functional as F
from kernel_testing import DEVICE, DTYPES, assert_close

from kernels.fused_moe import fused_moe, fused_moe_ref, moe_align


def route(x, num_experts, top_k, dtype):
    """Random router logits -> renormalised top-k weights and expert ids, as Qwen3-MoE routes."""
    logits = torch.randn(x.shape[0], num_experts, device=DEVICE)
    weights, ids = torch.topk(torch.softmax(logits, -1), top_k, dim=-1)
    return (weights / weights.sum(-1, keepdim=True)).to(dtype), ids


def per_token(x, w13, w2, weights, ids):
    """The definition, one token and one expert at a time."""
    out = torch.zeros_like(x, dtype=torch.float32)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = ids[t, j]
            gate, up = F.linear(x[t].float(), w13[e].float()).chunk(2)
            out[t] += weights[t, j].float() * F.linear(F.silu(gate) * up, w2[e].float())
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_tokens, hidden, inter, num_experts, top_k",
                         [(1, 64, 32, 8, 2), (5, 48, 40, 7, 3), (33, 96, 24, 16, 4), (20, 32, 16, 4, 4)])
def test_fused_moe_matches_reference_and_definition(dtype, num_tokens, hidden, inter, num_experts, top_k):
    x = torch.randn(num_tokens, hidden, device=DEVICE, dtype=dtype)
    w13 = (torch.randn(num_experts, 2 * inter, hidden, device=DEVICE) / hidden**0.5).to(dtype)
    w2 = (torch.randn(num_experts, hidden, inter, device=DEVICE) / inter**0.5).to(dtype)
    weights, ids = route(x, num_experts, top_k, dtype)
    want = fused_moe_ref(x, w13, w2, weights, ids)
    assert_close(fused_moe(x, w13, w2, weights, ids), want, dtype)
    if dtype == torch.float32:
        assert_close(want, per_token(x, w13, w2, weights, ids), dtype)


@pytest.mark.parametrize("block_m", [16, 32])
def test_moe_align_tiles_hold_one_expert_each(block_m):
    ids = torch.randint(0, 6, (37, 3), device=DEVICE)
    ids[:, 1] = 2  # one busy expert spanning several tiles; some experts may get none
    sorted_ids, block_experts, num_padded = moe_align(ids, 6, block_m)
    m, used = ids.numel(), int(num_padded)
    assert used % block_m == 0 and sorted_ids.shape[0] >= used
    real = sorted_ids[:used][sorted_ids[:used] < m]
    assert sorted(real.tolist()) == list(range(m))  # every pair exactly once
    assert (sorted_ids[used:] == m).all()
    flat = ids.flatten()
    for b in range(used // block_m):
        tile = sorted_ids[b * block_m:(b + 1) * block_m]
        tile = tile[tile < m].long()
        assert (flat[tile] == block_experts[b]).all()


def test_fused_moe_rejects_bad_inputs():
    x = torch.randn(4, 32, device=DEVICE)
    w13, w2 = torch.randn(4, 32, 32, device=DEVICE), torch.randn(4, 32, 16, device=DEVICE)
    weights, ids = route(x, 4, 2, torch.float32)
    with pytest.raises(ValueError, match="w2"):
        fused_moe(x, w13, torch.randn(4, 32, 8, device=DEVICE), weights, ids)
    with pytest.raises(TypeError, match="w13"):
        fused_moe(x, w13.double(), w2, weights, ids)
    with pytest.raises(ValueError, match="topk_weights"):
        fused_moe(x, w13, w2, weights[:, :1], ids)
    with pytest.raises(ValueError, match="stride 1"):
        fused_moe(x.t().contiguous().t(), w13, w2, weights, ids)
