"""Sampling: seeds, top-k/top-p/min-p, penalties, stop strings and tokens, validation."""
import pytest
import torch

from inference import SamplingParams
from inference.errors import InvalidRequestError
from inference.sampler import SamplingRow, apply_penalties, filter_top_k_top_p_min_p, sample


def row(**kw):
    out = kw.pop("output", [])
    prompt = kw.pop("prompt", [])
    return SamplingRow(SamplingParams(**kw), prompt, out, None, [])


@pytest.mark.parametrize("field,value", [
    ("temperature", -0.1), ("top_p", 0.0), ("top_p", 1.5), ("top_k", -2), ("min_p", 1.5),
    ("repetition_penalty", 0.0), ("presence_penalty", 3.0), ("frequency_penalty", -2.5),
    ("max_tokens", 0), ("min_tokens", -1), ("n", 0), ("logprobs", 50), ("stop", [""]),
    ("stop_token_ids", [-1]), ("seed", 1.5), ("temperature", float("nan")),
])
def test_bad_parameters_are_rejected_naming_the_field(field, value):
    with pytest.raises(InvalidRequestError) as e:
        SamplingParams(**{field: value})
    assert e.value.field == field
    assert field in str(e.value)


def test_min_tokens_above_max_tokens_is_rejected():
    with pytest.raises(ValueError, match="min_tokens"):
        SamplingParams(min_tokens=10, max_tokens=5)


def test_vllm_defaults():
    p = SamplingParams()
    assert (p.temperature, p.top_p, p.top_k, p.min_p, p.max_tokens, p.n) == (1.0, 1.0, 0, 0.0, 16, 1)
    assert SamplingParams(top_k=-1).top_k == 0


def test_repetition_penalty_lowers_seen_tokens_both_signs():
    logits = torch.tensor([[2.0, -2.0, 2.0, -2.0]])
    out = apply_penalties(logits.clone(), [row(repetition_penalty=2.0, prompt=[0], output=[1])])
    assert out.tolist() == [[1.0, -4.0, 2.0, -2.0]]


def test_presence_and_frequency_penalties_scale_with_counts():
    logits = torch.zeros(1, 4)
    out = apply_penalties(logits, [row(presence_penalty=0.5, frequency_penalty=0.25, output=[2, 2, 2, 1])])
    assert out.tolist() == [[0.0, -0.75, -1.25, 0.0]]


def test_top_k_top_p_min_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(3, 1)
    rows = [row(top_k=2), row(top_p=0.7), row(min_p=0.25)]
    kept = filter_top_k_top_p_min_p(logits.clone(), rows) > float("-inf")
    assert kept.tolist() == [[True, True, False, False],  # top 2
                             [True, True, False, False],  # 0.5 < 0.7 <= 0.8
                             [True, True, True, False]]  # p >= 0.25 * 0.5


def test_top_k_1_is_greedy_and_greedy_is_argmax():
    torch.manual_seed(0)
    logits = torch.randn(8, 100)
    greedy = sample(logits, [row(temperature=0.0)] * 8).token_ids
    top1 = sample(logits, [row(temperature=1.0, top_k=1)] * 8).token_ids
    assert greedy == top1 == logits.argmax(-1).tolist()


def test_seeded_rows_do_not_depend_on_their_neighbours():
    torch.manual_seed(0)
    logits = torch.randn(4, 1000)

    def seeded(seed):
        return SamplingRow(SamplingParams(temperature=1.0, seed=seed), [], [],
                           torch.Generator().manual_seed(seed), [])

    a = sample(logits, [seeded(7), row(temperature=1.0), seeded(8), row(temperature=1.0)]).token_ids
    b = sample(logits[[2, 0]], [seeded(8), seeded(7)]).token_ids
    assert [a[2], a[0]] == b


def test_sampling_follows_the_distribution():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).repeat(4000, 1)
    ids = torch.tensor(sample(logits, [row(temperature=1.0)] * 4000).token_ids)
    freq = torch.bincount(ids, minlength=3).float() / 4000
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.03)


def test_logprobs_report_the_sampled_token_and_top_k():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    out = sample(logits, [row(temperature=0.0, logprobs=2)])
    assert out.token_ids == [0]
    lp = out.logprobs[0]
    assert set(lp) == {0, 1} and abs(lp[0] - torch.log(torch.tensor(0.6)).item()) < 1e-5


# -- through the engine (the default model) ---------------------------------------------------------
def test_seed_reproduces_a_request_whatever_runs_beside_it(smol):
    params = SamplingParams(temperature=1.0, top_p=0.95, seed=1234, max_tokens=12)
    alone = smol.generate(["Tell me a story about a cat."], params)[0].outputs[0].token_ids
    crowd = smol.generate(["Tell me a story about a cat.", "Another prompt", "ㅎㅇ? 넌 누구야?"],
                          [params, SamplingParams(temperature=1.0, max_tokens=12),
                           SamplingParams(temperature=0.7, seed=5, max_tokens=12)])
    assert crowd[0].outputs[0].token_ids == alone


def test_stop_strings_are_not_emitted_and_stop_tokens_stop(smol):
    prompt = "Count from one to ten: one, two, three,"
    free = smol.generate([prompt], SamplingParams(temperature=0, max_tokens=20))[0].outputs[0]
    assert " five" in free.text
    cut = smol.generate([prompt], SamplingParams(temperature=0, max_tokens=20, stop=[" five"]))[0].outputs[0]
    assert cut.finish_reason == "stop" and cut.stop_reason == " five"
    assert cut.text == free.text[:free.text.index(" five")]
    stop_id = free.token_ids[2]
    by_token = smol.generate([prompt], SamplingParams(temperature=0, max_tokens=20,
                                                      stop_token_ids=[stop_id]))[0].outputs[0]
    assert by_token.token_ids == free.token_ids[:3]
    assert by_token.finish_reason == "stop" and by_token.stop_reason == stop_id


def test_n_gives_several_completions_and_min_tokens_holds_back_eos(smol):
    out = smol.generate(["Hi"], SamplingParams(n=3, temperature=1.0, seed=3, max_tokens=8))[0]
    assert len(out.outputs) == 3 and len({tuple(o.token_ids) for o in out.outputs}) > 1
    eos = smol.engine.eos_token_ids
    short = smol.chat([{"role": "user", "content": "Say OK."}], SamplingParams(temperature=0, max_tokens=40))[0]
    n_short = len(short.outputs[0].token_ids)
    forced = smol.chat([{"role": "user", "content": "Say OK."}],
                       SamplingParams(temperature=0, max_tokens=40, min_tokens=n_short + 3))[0]
    assert len(forced.outputs[0].token_ids) >= n_short + 3
    assert not set(forced.outputs[0].token_ids[:n_short + 2]) & set(eos)


def test_repetition_penalty_reduces_repeats_in_generation(smol):
    prompt = "the the the the the the the the"

    def repeats(**kw):
        ids = smol.generate([prompt], SamplingParams(temperature=0, max_tokens=32, ignore_eos=True, **kw))[0]
        ids = ids.outputs[0].token_ids
        return len(ids) - len(set(ids))  # generated tokens that repeat an earlier one

    assert repeats(repetition_penalty=1.5) < repeats()
    assert repeats(frequency_penalty=1.0) < repeats()


@pytest.mark.parametrize("vocab", [128256, 49152, 151936, 1000, 50])
@pytest.mark.parametrize("num_rows", [1, 3, 16, 17])
def test_argmax_rows_matches_torch_argmax_ties_included(vocab, num_rows):
    """The two-stage argmax (few rows) gives torch's index, the first of tied maxima included."""
    from inference.sampler import argmax_rows

    g = torch.Generator().manual_seed(vocab + num_rows)
    for dtype in (torch.float32, torch.bfloat16):
        logits = torch.randn(num_rows, vocab, generator=g).to(dtype)
        # Ties: each row's max appears again later, and in some rows earlier, in another chunk.
        for r in range(num_rows):
            top = int(torch.randint(0, vocab, (1,), generator=g))
            later = int(torch.randint(0, vocab, (1,), generator=g))
            logits[r, top] = logits[r, later] = 10.0
        assert torch.equal(argmax_rows(logits), logits.argmax(dim=-1))
    sliced = torch.randn(num_rows, vocab + 7, generator=g)[:, :vocab]  # not contiguous: falls back
    assert torch.equal(argmax_rows(sliced), sliced.argmax(dim=-1))
