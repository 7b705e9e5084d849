"""Streaming text never splits a UTF-8 character and holds back what may start a stop string."""
from inference import SamplingParams
from inference.detokenizer import IncrementalDetokenizer


def test_korean_streams_whole_characters(smol):
    tok = smol.tokenizer
    text = "안녕하세요! 넌 누구야? 저는 파고다의 챗봇입니다. 🙂"
    ids = tok.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tok, [], [])
    pieces = []
    for t in ids:
        detok.add(t)
        piece = detok.delta(False)
        assert "\ufffd" not in piece
        pieces.append(piece)
    pieces.append(detok.delta(True))
    assert "".join(pieces) == text
    assert len(ids) > len([p for p in pieces if p])  # some tokens were byte fragments, held back


def test_stop_string_across_tokens_is_cut_and_never_streamed(smol):
    tok = smol.tokenizer
    ids = tok.encode("Hello world, STOP here please", add_special_tokens=False)
    detok = IncrementalDetokenizer(tok, [], ["STOP"])
    streamed = []
    stop = None
    for t in ids:
        stop = detok.add(t)
        if stop:
            break
        streamed.append(detok.delta(False))
    streamed.append(detok.delta(True))
    assert stop == "STOP"
    assert "".join(streamed) == "Hello world, "


def test_korean_prompt_round_trips_through_the_engine(smol):
    out = smol.chat([{"role": "user", "content": "ㅎㅇ? 넌 누구야?"}], SamplingParams(temperature=0, max_tokens=30))[0]
    assert "ㅎㅇ? 넌 누구야?" in out.prompt
    assert "\ufffd" not in out.outputs[0].text
    assert out.outputs[0].text == smol.tokenizer.decode(
        [t for t in out.outputs[0].token_ids if t not in smol.engine.eos_token_ids], skip_special_tokens=True)


def test_pinned_system_prefix_is_a_token_prefix_of_every_chat_prompt(smol):
    """What the platform pins (the system turn alone) must be where each chat's tokens start."""
    tok = smol.tokenizer

    def encode(messages, add_generation_prompt):
        text = tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)
        return tok.encode(text, add_special_tokens=False)

    system = "당신은 파고다 주식회사의 사내 비서입니다. Answer briefly and cite the policy."
    prefix = encode([{"role": "system", "content": system}], False)  # what AsyncLLM.encode_system_prefix pins
    for history in ([{"role": "user", "content": "ㅎㅇ? 넌 누구야?"}],
                    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                     {"role": "user", "content": "What is our leave policy?"}]):
        ids = encode([{"role": "system", "content": system}] + history, True)
        assert ids[:len(prefix)] == prefix and len(ids) > len(prefix)
