"""Fixtures of the deployment tests: no engine of this process's own, the in-memory channel layer
unless a test asks for Redis, and a fake engine that records its pins.

The replica tests (test_replicas.py) run real servers in other processes; see replica_cluster.py.
"""
from __future__ import annotations

import pytest

from engine_runtime import runtime
from tenants import pinning


@pytest.fixture(autouse=True)
def _isolated(settings):
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "pagoda.channel_layer.InMemoryChannelLayer"}}
    yield
    pinning._pinned_versions.clear()
    pinning._pin_errors.clear()


class FakePin:
    def __init__(self, key: str, token_ids: list[int]):
        self.key, self.num_prompt_tokens = key, len(token_ids)
        self.num_tokens = len(token_ids) // 16 * 16
        self.num_blocks = len(token_ids) // 16


class FakeEngine:
    """The pinning surface of AsyncLLM (one token per word); `num_pin_calls` counts prefix computations."""

    model_name = "fake"
    max_model_len = 4096
    error = None

    def __init__(self):
        self.pinned: dict[str, FakePin] = {}
        self.num_pin_calls = 0

    def encode_system_prefix(self, text: str) -> list[int]:
        return list(range(len(text.split()) + 3))

    def pin_prefix(self, key, prompt, tenant=None):
        self.num_pin_calls += 1
        self.pinned[key] = FakePin(key, prompt)
        return self.pinned[key]

    def unpin_prefix(self, key):
        return self.pinned.pop(key, None) is not None

    def pins(self):
        return dict(self.pinned)

    def is_alive(self):
        return True


@pytest.fixture
def fake_engine(monkeypatch):
    """A FakeEngine as this process's running engine (engine_runtime.peek() returns it)."""
    engine = FakeEngine()
    monkeypatch.setattr(runtime, "_engine", engine)
    monkeypatch.setattr(runtime, "_state", "ready")
    return engine
