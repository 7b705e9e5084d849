"""Fixtures for the observability tests.

`real_engine`: the session's engine through engine_runtime (SmolLM2 on the CPU, as the server builds
it); it is the same engine tests/platform uses when both run in one session. Tests that stop an
engine use `tiny_runtime`: a separate tiny random-weights engine put in engine_runtime's place, so
the session engine keeps running.
"""
import pytest

from engine_runtime import runtime
from runtime_testing import real_engine, runtime_set_aside  # noqa: F401 (fixture)
from observability.request_log import REQUEST_LOGGER


@pytest.fixture(autouse=True)
def _engine_off(settings):
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    settings.PAGODA_METRICS_ALLOWED_IPS = ["127.0.0.1", "::1"]
    settings.PAGODA_METRICS_TOKEN = ""
    settings.PAGODA_LOG_CONTENT = False


@pytest.fixture
def tiny_runtime(tiny_llama_path, monkeypatch, settings):
    """engine_runtime building a tiny real engine (random weights, 64 KV blocks) when started."""
    from inference import AsyncLLM, EngineConfig

    def build():
        return AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64), progress=False)

    monkeypatch.setattr(runtime, "_build_engine", build)
    settings.PAGODA_ENGINE = "lazy"
    with runtime_set_aside():
        yield


class ListHandler:
    """Collects the records of one logger (pagoda.requests does not propagate to caplog's root handler)."""

    def __init__(self, name: str):
        import logging

        self.records: list = []
        self.logger = logging.getLogger(name)
        self.handler = logging.Handler()
        self.handler.emit = self.records.append

    def __enter__(self):
        self.logger.addHandler(self.handler)
        return self.records

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)


@pytest.fixture
def request_logs():
    """The LogRecords written to "pagoda.requests" during the test."""
    with ListHandler(REQUEST_LOGGER) as records:
        yield records

