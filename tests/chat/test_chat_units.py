"""Pure pieces of the chat app: frame parsing, prompt building and trimming, the visible thread."""
import json
from types import SimpleNamespace

import pytest

from chat import protocol
from chat.errors import ChatError, to_chat_error
from chat.prompting import build_prompt_ids
from chat.replies import ReplyStream
from chat.branches import Tree
from chat.selectors import prompt_turns
from engine_runtime import EngineUnavailable
from inference.errors import EngineDeadError, PromptTooLongError, QueueFullError


# --- frames -----------------------------------------------------------------------------------------
def test_user_message_frame_keeps_the_content_exactly():
    frame = protocol.parse_client_frame(json.dumps({"type": "user_message", "content": "  안녕\n  code  ",
                                                    "profile": "coding"}), 100)
    assert frame == protocol.ClientFrame("user_message", "  안녕\n  code  ", "coding")


def test_nul_characters_are_dropped():
    frame = protocol.parse_client_frame(json.dumps({"type": "user_message", "content": "a\x00b"}), 100)
    assert frame.content == "ab"
    with pytest.raises(ChatError) as info:
        protocol.parse_client_frame(json.dumps({"type": "user_message", "content": "\x00"}), 100)
    assert info.value.code == "empty_message"


def test_stop_and_regenerate_frames():
    assert protocol.parse_client_frame('{"type": "stop", "content": "ignored"}', 10) == protocol.ClientFrame("stop")
    assert protocol.parse_client_frame('{"type": "regenerate"}', 10) == protocol.ClientFrame("regenerate")
    assert protocol.parse_client_frame('{"type": "regenerate", "profile": ""}', 10).profile is None


def test_the_limit_counts_characters_not_bytes():
    assert protocol.parse_client_frame(json.dumps({"type": "user_message", "content": "가" * 10}), 10).content
    with pytest.raises(ChatError) as info:
        protocol.parse_client_frame(json.dumps({"type": "user_message", "content": "가" * 11}), 10)
    assert info.value.code == "message_too_long"


def test_a_huge_frame_is_refused_before_it_is_parsed():
    with pytest.raises(ChatError) as info:
        protocol.parse_client_frame("[" * 100_000, 10)
    assert info.value.code == "message_too_long"


def test_server_frames_are_utf8_json():
    assert protocol.delta_frame("서울") == '{"type": "delta", "text": "서울"}'
    error = json.loads(protocol.error_frame(ChatError("busy", "wait"), message_id=3))
    assert error == {"type": "error", "code": "busy", "message": "wait", "message_id": 3}


def test_engine_errors_map_to_codes():
    assert to_chat_error(PromptTooLongError("too long", field="prompt")).code == "context_length_exceeded"
    assert to_chat_error(QueueFullError("full")).code == "engine_overloaded"
    assert to_chat_error(EngineUnavailable("loading")).code == "engine_unavailable"
    assert to_chat_error(EngineDeadError("crashed")).code == "engine_unavailable"
    assert to_chat_error(RuntimeError("secret detail")).code == "internal_error"
    assert "secret" not in to_chat_error(RuntimeError("secret detail")).message


# --- prompts ------------------------------------------------------------------------------------------
def _encode(messages):
    """A stand-in chat template: one token per word plus two per turn."""
    return [len(m["role"]) for m in messages for _ in range(len(m["content"].split()) + 2)]


def _turns(*words_per_turn):
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": " ".join(["w"] * n)} for i, n in enumerate(words_per_turn)]


def test_system_prompt_comes_first_and_everything_fits():
    seen = []
    ids, num_dropped = build_prompt_ids(lambda m: seen.append(m) or _encode(m), "be brief", _turns(3, 3, 3),
                                        max_model_len=100, num_reserved=10)
    assert num_dropped == 0 and len(ids) == 4 + 3 * 5
    assert seen[0][0] == {"role": "system", "content": "be brief"} and len(seen) == 1


def test_oldest_turns_are_dropped_to_leave_room_for_the_reply():
    turns = _turns(10, 10, 10, 10, 2)  # user, assistant, user, assistant, user
    ids, num_dropped = build_prompt_ids(_encode, None, turns, max_model_len=40, num_reserved=10)
    assert num_dropped == 2  # starts at the second user turn: 12 + 12 + 4 = 28 tokens, 10 free
    assert len(ids) == 28
    ids, num_dropped = build_prompt_ids(_encode, None, turns, max_model_len=25, num_reserved=10)
    assert num_dropped == 4 and len(ids) == 4  # only the newest turn is left


def test_a_last_turn_that_fits_without_the_reserve_is_still_sent():
    ids, num_dropped = build_prompt_ids(_encode, None, _turns(5, 5, 20), max_model_len=23, num_reserved=10)
    assert (len(ids), num_dropped) == (22, 2)


def test_a_last_turn_that_does_not_fit_is_an_error():
    with pytest.raises(PromptTooLongError):
        build_prompt_ids(_encode, "sys", _turns(50), max_model_len=40, num_reserved=1)


# --- the thread ---------------------------------------------------------------------------------------
def _message(pk, role, content="x", status="complete", parent_id=None):
    no_files = SimpleNamespace(all=lambda: [])  # as a message's attachments manager with none attached
    return SimpleNamespace(pk=pk, role=role, content=content, status=status, parent_id=parent_id,
                           attachments=no_files)


def _rows():
    return [_message(1, "user", "q1"), _message(2, "assistant", "a1", parent_id=1),
            _message(3, "assistant", "a1 again", parent_id=1), _message(4, "user", "q2", parent_id=3),
            _message(5, "assistant", "", status="error", parent_id=4), _message(6, "user", "q3", parent_id=5)]


def test_only_the_newest_regenerated_reply_is_shown_and_prompted():
    thread = Tree(_rows()).current()
    assert [m.pk for m in thread] == [1, 3, 4, 5, 6]
    assert prompt_turns(thread) == [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1 again"},
                                    {"role": "user", "content": "q2"}, {"role": "user", "content": "q3"}]


def test_an_edit_forks_and_the_older_branch_stays_reachable():
    rows = [*_rows(), _message(7, "user", "q2, edited", parent_id=3), _message(8, "assistant", "a2'", parent_id=7),
            _message(9, "user", "first, edited"), _message(10, "system", "not a turn", parent_id=9)]
    tree = Tree(rows[:-2])
    assert [m.pk for m in tree.current()] == [1, 3, 7, 8]
    assert [m.pk for m in tree.path_to(tree.by_id[6])] == [1, 3, 4, 5, 6]  # the old branch, whole
    tree = Tree(rows)  # an edit of the first message is a first message too; system rows are no turns
    assert [m.pk for m in tree.current()] == [9] and 10 not in tree.by_id


def test_reply_stream_status():
    stream = ReplyStream()
    assert stream.status == "stopped"  # never finished: the socket went away
    stream.take(SimpleNamespace(text="hi", token_ids=[1], finished=True, finish_reason="length",
                                num_prompt_tokens=5, num_cached_tokens=0, num_output_tokens=1))
    assert (stream.status, stream.text, stream.usage()["completion_tokens"]) == ("complete", "hi", 1)
