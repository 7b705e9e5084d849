"""OutputProcessor on its own (no model): stop checks, finishing, the step trace, records by identity."""
import pytest

from inference.block_manager import BlockManager
from inference.output_processor import OutputProcessor
from inference.sampling_params import SamplingParams
from inference.scheduler import Scheduler
from inference.sequence import Sequence

EOS = 2


@pytest.fixture
def parts():
    scheduler = Scheduler(BlockManager(16, 16), max_num_seqs=4, max_num_batched_tokens=64)
    return scheduler, OutputProcessor(scheduler, None, [EOS], max_model_len=40)


def admit(scheduler, processor, request_id, params, prompt_len=10):
    seq = Sequence(request_id, list(range(100, 100 + prompt_len)), params)
    processor.add(seq)
    scheduler.add(seq)
    out = scheduler.schedule()
    seq.num_computed_tokens = seq.num_tokens
    return seq, out


def test_a_request_runs_until_its_first_stop_condition(parts):
    scheduler, processor = parts
    eos, _ = admit(scheduler, processor, "eos", SamplingParams(max_tokens=10))
    stop, _ = admit(scheduler, processor, "stop", SamplingParams(max_tokens=10, stop_token_ids=[7]))
    ignore, _ = admit(scheduler, processor, "ignore", SamplingParams(max_tokens=3, ignore_eos=True))
    context, out = admit(scheduler, processor, "context", SamplingParams(max_tokens=None), prompt_len=38)
    trace_list = processor.trace = []
    trace = processor.begin_step(out)
    assert processor.num_steps == 1 and trace_list == [trace] and not trace.decode_only
    assert processor.append(eos, 5, None, 0.0, trace).finished is False
    assert processor.append(eos, EOS, None, 0.0, trace).finish_reason == "stop"
    d = processor.append(stop, 7, None, 0.0, trace)
    assert (d.finished, d.finish_reason, d.stop_reason, d.token_ids) == (True, "stop", 7, [7])
    assert [processor.append(ignore, EOS, None, 0.0).finished for _ in range(3)] == [False, False, True]
    assert processor.append(context, 9, None, 0.0).finish_reason is None  # 39 of 40 tokens
    assert processor.append(context, 9, None, 0.0).finish_reason == "length"
    assert trace.finished == ["eos", "stop"]  # only the calls that passed this step's trace
    assert processor.requests == {} and scheduler.num_running == 0
    assert scheduler.block_manager.pool.num_free == 16
    assert processor.num_generation_tokens_total == 2 + 1 + 3 + 2


def test_an_aborted_id_reused_by_a_new_request_is_not_the_old_record(parts):
    scheduler, processor = parts
    old, _ = admit(scheduler, processor, "r", SamplingParams(max_tokens=5))
    final = processor.abort("r")
    assert (final.finished, final.finish_reason) == (True, "abort") and processor.abort("r") is None
    new, _ = admit(scheduler, processor, "r", SamplingParams(max_tokens=5))
    assert processor.get(old) is None and processor.get(new).seq is new and "r" in processor


def test_a_failed_request_ends_with_its_error(parts):
    scheduler, processor = parts
    seq, _ = admit(scheduler, processor, "bad", SamplingParams(max_tokens=5))
    d = processor.fail(seq, "RuntimeError: boom")
    assert (d.finished, d.finish_reason, d.error) == (True, "error", "RuntimeError: boom")
    assert "bad" not in processor and scheduler.block_manager.pool.num_free == 16
