"""Engine-runtime fixtures and helpers shared by the platform, chat and observability tests.

`real_engine`: the session's one engine, loaded through engine_runtime as the server does (SmolLM2
on the CPU); `engine`: that engine with no tenant pins, for one test; `runtime_set_aside()`: run with
a fresh, stopped engine_runtime and put the session engine back afterwards.
"""
import contextlib
import importlib.util

import pytest
from django.test import override_settings

import engine_runtime
from engine_runtime import runtime
from tenants import pinning


def has_real_engine() -> bool:
    if importlib.util.find_spec("inference") is None:
        return False
    import inference

    return hasattr(inference, "AsyncLLM")


@pytest.fixture(scope="session")
def real_engine(django_db_setup, django_db_blocker):
    """The real engine, loaded once per test session through engine_runtime (as the server does)."""
    if not has_real_engine():
        pytest.skip("inference.AsyncLLM is not available")
    with override_settings(PAGODA_ENGINE="lazy", PAGODA_PIN_SYNC_SECONDS=0, PAGODA_DEVICE="cpu"):
        with django_db_blocker.unblock():
            engine = engine_runtime.get_engine()
    yield engine
    engine_runtime.shutdown()


def clear_pins(engine) -> None:
    for key in list(engine.pins()):
        if key.startswith("tenant:"):
            engine.unpin_prefix(key)
    pinning._pinned_versions.clear()
    pinning._pin_errors.clear()


@pytest.fixture
def engine(real_engine, db):
    """The session's real engine with no tenant pins, for one test."""
    clear_pins(real_engine)
    yield real_engine
    clear_pins(real_engine)


@contextlib.contextmanager
def runtime_set_aside():
    """A fresh, stopped engine_runtime inside; the session engine, if any, is put back afterwards."""
    saved = (runtime._engine, runtime._state, runtime._error, runtime._num_starts)
    runtime._engine, runtime._state, runtime._error, runtime._num_starts = None, "stopped", None, 0
    try:
        yield
    finally:
        engine_runtime.shutdown()
        runtime._engine, runtime._state, runtime._error, runtime._num_starts = saved
        if runtime._state == "ready":
            runtime._ready.set()
