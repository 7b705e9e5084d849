"""One JSON line per finished request on "pagoda.requests"; no content unless PAGODA_LOG_CONTENT."""
import asyncio
import json
import logging
import time

import pytest

from inference.outputs import StreamDelta
from observability import metrics, track_request
from observability.request_log import FIELDS_ATTR, REQUEST_LOGGER, JsonFormatter

SECRET_PROMPT = "the merger with Globex closes on Friday"
SECRET_REPLY = "Understood, confidential"


def _deltas(start: float) -> list[StreamDelta]:
    times = {"arrival": start, "first_scheduled": start + 0.01, "first_token": start + 0.05,
             "finished": None, "num_preemptions": 1}
    words = SECRET_REPLY.split(" ")
    deltas = [StreamDelta("r-1", words[0], [11], False, None, 40, 32, 1, metrics=dict(times))]
    done = dict(times, finished=start + 0.2)
    deltas.append(StreamDelta("r-1", " " + words[1], [12], True, "stop", 40, 32, 2, metrics=done))
    return deltas


def _run(**kwargs) -> dict:
    with track_request("r-1", tenant="acme", profile="precise", source="chat", prompt=SECRET_PROMPT,
                       **kwargs) as rec:
        for delta in _deltas(time.monotonic()):
            rec.on_delta(delta)
    return rec


def test_one_line_with_the_fields_and_no_content(request_logs):
    _run(extra={"conversation_id": 7})
    assert len(request_logs) == 1
    record = request_logs[0]
    fields = getattr(record, FIELDS_ATTR)
    assert fields["event"] == "request_finished" and fields["request_id"] == "r-1"
    assert (fields["tenant"], fields["profile"], fields["source"]) == ("acme", "precise", "chat")
    assert (fields["prompt_tokens"], fields["cached_tokens"], fields["completion_tokens"]) == (40, 32, 2)
    assert fields["finish_reason"] == "stop" and fields["num_preemptions"] == 1
    assert fields["engine_ttft_s"] == pytest.approx(0.05) and fields["queue_s"] == pytest.approx(0.01)
    assert fields["prefill_s"] == pytest.approx(0.04) and fields["conversation_id"] == 7
    assert 0 <= fields["ttft_s"] <= fields["duration_s"] < 0.2  # the edge's clock: the deltas came at once
    assert "prompt" not in fields and "completion" not in fields and "error" not in fields

    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["logger"] == REQUEST_LOGGER and parsed["level"] == "INFO" and parsed["ts"].endswith("+00:00")
    assert {k: parsed[k] for k in fields} == fields
    assert "Globex" not in line and "confidential" not in line


def test_content_only_when_the_setting_is_on(request_logs, settings):
    settings.PAGODA_LOG_CONTENT = True
    _run()
    fields = getattr(request_logs[0], FIELDS_ATTR)
    assert fields["prompt"] == SECRET_PROMPT and fields["completion"] == SECRET_REPLY


def test_the_settings_send_request_lines_through_the_json_formatter_only():
    logger = logging.getLogger(REQUEST_LOGGER)
    assert logger.propagate is False
    assert JsonFormatter in [type(h.formatter) for h in logger.handlers]  # pytest adds its own too


def test_errors_and_early_exits(request_logs):
    with pytest.raises(RuntimeError):
        with track_request("r-err", tenant="acme") as rec:
            rec.on_delta(_deltas(time.monotonic())[0])
            raise RuntimeError("engine loop crashed")
    with track_request("r-left", tenant="acme") as rec:
        rec.on_delta(_deltas(time.monotonic())[0])  # the reader stopped before the last delta
    with pytest.raises(asyncio.CancelledError):
        with track_request("r-cancel", tenant="acme"):
            raise asyncio.CancelledError
    rec = track_request("r-twice", tenant="acme")
    assert rec.finish(finish_reason="length")["finish_reason"] == "length"
    assert rec.finish() is None  # a second finish writes nothing

    lines = {getattr(r, FIELDS_ATTR)["request_id"]: getattr(r, FIELDS_ATTR) for r in request_logs}
    assert len(request_logs) == 4
    assert lines["r-err"]["finish_reason"] == "error"
    assert lines["r-err"]["error"] == "RuntimeError: engine loop crashed"
    assert lines["r-left"]["finish_reason"] == "abort" and lines["r-cancel"]["finish_reason"] == "abort"
    assert lines["r-cancel"]["ttft_s"] is None and lines["r-cancel"]["duration_s"] >= 0


def test_a_request_without_tenant_is_labelled_none(request_logs):
    counter = metrics.REQUESTS_FINISHED.labels(metrics.NO_TENANT, "api", "stop")
    before = counter._value.get()
    with track_request("r-anon", source="api") as rec:
        for delta in _deltas(time.monotonic()):
            rec.on_delta(delta)
    assert counter._value.get() == before + 1
    assert getattr(request_logs[0], FIELDS_ATTR)["tenant"] is None


def test_ttft_counts_from_the_servers_arrival_and_the_engines_split_sits_beside_it(request_logs):
    """A request that waited 0.3 s in the web layer before the engine saw it: the user's TTFT holds those
    0.3 s, the engine's does not, and both histograms get one observation."""
    edge = metrics.TIME_TO_FIRST_TOKEN.labels("acme")
    engine = metrics.ENGINE_TIME_TO_FIRST_TOKEN.labels("acme")
    before = (edge._sum.get(), engine._sum.get())
    now = time.monotonic()
    with track_request("r-edge", tenant="acme", arrival=now - 0.3) as rec:
        for delta in _deltas(now - 0.06):
            rec.on_delta(delta)
    fields = getattr(request_logs[0], FIELDS_ATTR)
    assert fields["ttft_s"] >= 0.3 and fields["engine_ttft_s"] == pytest.approx(0.05)
    assert fields["queue_s"] + fields["prefill_s"] == pytest.approx(fields["engine_ttft_s"])
    assert edge._sum.get() - before[0] == pytest.approx(fields["ttft_s"])
    assert engine._sum.get() - before[1] == pytest.approx(0.05)
