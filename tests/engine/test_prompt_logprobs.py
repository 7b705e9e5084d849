"""prompt_logprobs (scoring, perplexity) against transformers, under chunked prefill, prefix-cache hits
and preemption; logprobs as vLLM's Logprob objects; RequestOutput.metrics."""
import math
import pickle

import pytest
import torch

from inference import LLM, Logprob, SamplingParams
from inference.logprobs import TokenLogprobs
from inference.wire import delta_from_tuple, delta_to_tuple

TEXTS = ["The capital of France is Paris, and the capital of Germany is Berlin.",
         "Once upon a time there was a small dragon who lived in a cave by the sea."]


def hf_logprobs(path, ids: list[int]) -> torch.Tensor:
    """[len(ids) - 1, V]: transformers' log-probabilities at every position but the last."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, :-1].float().log_softmax(dim=-1)


@pytest.fixture(scope="module")
def tiny(tiny_llama_path):
    """Prompts of 50 tokens run in four chunks (16 tokens a step) over 8-token blocks."""
    return LLM(model=str(tiny_llama_path), progress=False, device="cpu", block_size=8, max_num_batched_tokens=16)


def scores(output) -> list[float]:
    """The prompt tokens' logprobs, from the second token on (the first has none)."""
    return [entry[token].logprob for token, entry in zip(output.prompt_token_ids[1:], output.prompt_logprobs[1:])]


def test_perplexity_script_matches_transformers(smol, smol_path):
    # A vLLM user's perplexity script, as written for vLLM.
    outputs = smol.generate(TEXTS, SamplingParams(max_tokens=1, prompt_logprobs=0))
    for output in outputs:
        ids = output.prompt_token_ids
        assert len(output.prompt_logprobs) == len(ids) and output.prompt_logprobs[0] is None
        ours = scores(output)
        hf = hf_logprobs(smol_path, ids).gather(1, torch.tensor(ids[1:])[:, None]).squeeze(1).tolist()
        assert max(abs(a - b) for a, b in zip(ours, hf)) < 2e-3
        assert math.exp(-sum(ours) / len(ours)) == pytest.approx(math.exp(-sum(hf) / len(hf)), rel=1e-3)


def test_chunked_and_cache_hit_prompts_score_as_transformers_does(tiny, tiny_llama_path):
    prompt = list(range(100, 150))
    tiny.generate([prompt], SamplingParams(max_tokens=1))  # its blocks are now in the prefix cache
    scored = tiny.generate([prompt], SamplingParams(max_tokens=1, prompt_logprobs=3))[0]
    assert scored.num_cached_tokens == 0  # a cached block has no logits: the request computed them all
    again = tiny.generate([prompt], SamplingParams(max_tokens=1))[0]
    assert again.num_cached_tokens == 48  # and a plain request still hits the cache

    hf = hf_logprobs(tiny_llama_path, prompt)
    for position, (token, entry) in enumerate(zip(prompt[1:], scored.prompt_logprobs[1:])):
        row = hf[position]
        assert entry[token].logprob == pytest.approx(float(row[token]), abs=1e-4)
        assert entry[token].rank == 1 + int((row > row[token]).sum())
        top = row.topk(3)
        alternatives = [t for t in entry if t != token or t in top.indices.tolist()]
        assert sorted(alternatives, key=lambda t: entry[t].rank) == top.indices.tolist()
        assert [entry[t].rank for t in top.indices.tolist()] == [1, 2, 3]
        assert entry[token].decoded_token == tiny.get_tokenizer().decode([token])


def test_n_choices_score_the_prompt_once(tiny):
    params = SamplingParams(n=3, max_tokens=2, temperature=1.0, seed=5, prompt_logprobs=0)
    output = tiny.generate([list(range(200, 230))], params)[0]
    alone = tiny.generate([list(range(200, 230))], SamplingParams(max_tokens=1, prompt_logprobs=0))[0]
    assert len(output.outputs) == 3 and scores(output) == pytest.approx(scores(alone), abs=1e-5)


def test_a_preempted_prompt_keeps_its_scores(tiny_llama_path):
    # 9 blocks of 8 tokens: the long prompt fills most of them while the short request decodes; when
    # the short one needs another block the long one (the newest) is preempted mid-prefill, then
    # comes back and takes from the cache only what it had scored.
    llm = LLM(model=str(tiny_llama_path), progress=False, device="cpu", block_size=8, max_num_batched_tokens=8,
              num_kv_blocks=9)
    llm.engine.trace = []
    long_prompt = list(range(300, 360))
    outputs = llm.generate([list(range(10, 18)), long_prompt],
                           [SamplingParams(max_tokens=30, temperature=0, ignore_eos=True),
                            SamplingParams(max_tokens=1, prompt_logprobs=0)])
    assert any(step.preempted for step in llm.engine.trace)
    assert outputs[1].metrics.num_preemptions >= 1
    hf = hf_logprobs(tiny_llama_path, long_prompt).gather(1, torch.tensor(long_prompt[1:])[:, None]).squeeze(1)
    assert scores(outputs[1]) == pytest.approx(hf.tolist(), abs=1e-4)


def test_logprobs_are_vllm_logprob_objects(tiny):
    tokenizer = tiny.get_tokenizer()
    greedy = tiny.generate(["Once upon"], SamplingParams(max_tokens=4, logprobs=2, temperature=0, ignore_eos=True))
    completion = greedy[0].outputs[0]
    assert greedy[0].prompt_logprobs is None
    for token, entry in zip(completion.token_ids, completion.logprobs):
        assert all(isinstance(lp, Logprob) for lp in entry.values())
        assert entry[token].rank == 1 and sorted(lp.rank for lp in entry.values()) == [1, 2]
        assert entry[token].decoded_token == tokenizer.decode([token])
    assert completion.cumulative_logprob == pytest.approx(
        sum(entry[t].logprob for t, entry in zip(completion.token_ids, completion.logprobs)))
    sampled = tiny.generate(["Once upon"], SamplingParams(max_tokens=24, logprobs=1, temperature=5.0, seed=1,
                                                         ignore_eos=True))[0].outputs[0]
    ranks = [entry[token].rank for token, entry in zip(sampled.token_ids, sampled.logprobs)]
    assert max(ranks) > 1  # a hot sample leaves the top token: its rank says how far
    for token, entry in zip(sampled.token_ids, sampled.logprobs):
        likelier = [t for t in entry if entry[t].logprob > entry[token].logprob]
        assert entry[token].rank >= 1 + len(likelier)
    ids_only = tiny.generate(["Once"], SamplingParams(max_tokens=2, logprobs=0, detokenize=False))[0].outputs[0]
    assert all(lp.decoded_token is None for entry in ids_only.logprobs for lp in entry.values())


def test_request_metrics(tiny):
    output = tiny.generate(["Once upon a time"], SamplingParams(max_tokens=5, temperature=0, ignore_eos=True))[0]
    m = output.metrics
    assert m.num_generation_tokens == 5 and m.num_preemptions == 0
    assert m.arrival_time == m.queued_ts <= m.scheduled_ts <= m.first_token_ts <= m.last_token_ts <= m.finished_ts
    assert m.first_token_latency == pytest.approx(m.first_token_ts - m.arrival_time)
    # vLLM v0's RequestMetrics names read the same times
    assert (m.first_scheduled_time, m.first_token_time, m.last_token_time, m.finished_time) == (
        m.scheduled_ts, m.first_token_ts, m.last_token_ts, m.finished_ts)
    assert m.time_in_queue == pytest.approx(m.scheduled_ts - m.arrival_time)


def test_token_logprobs_keep_their_rank_across_the_wire():
    from inference import StreamDelta

    entry = TokenLogprobs({7: -2.5, 3: -0.1, 9: -1.0}, rank=3)
    delta = StreamDelta("r", "x", [7], True, "stop", 4, 0, 1, logprobs=[entry], prompt_logprobs=[None, entry])
    back = delta_from_tuple(pickle.loads(pickle.dumps(delta_to_tuple(delta))))
    assert back.logprobs == [entry] and back.logprobs[0].rank == 3 and back.prompt_logprobs[1].rank == 3
    assert [back.logprobs[0].rank_of(t) for t in (3, 9, 7)] == [1, 2, 3]
