"""engine_runtime's watchdog with fake engines (no model): a crashed loop is replaced and the start-up
hooks run again, at most PAGODA_ENGINE_MAX_RESTARTS times an hour; a shutdown is never "restarted".
The same through a live server: test_faults.py."""
import pytest

import engine_runtime
from engine_runtime import runtime


class FakeEngine:
    model_name = "fake"
    max_model_len = 64

    def __init__(self):
        self.error = None
        self.stopped = False

    def is_alive(self) -> bool:
        return self.error is None and not self.stopped

    def shutdown(self) -> None:
        self.stopped = True


@pytest.fixture
def engines(monkeypatch, settings):
    built: list[FakeEngine] = []

    def build():
        built.append(FakeEngine())
        return built[-1]

    settings.PAGODA_ENGINE = "lazy"
    settings.PAGODA_ENGINE_MAX_RESTARTS = 2
    monkeypatch.setattr(runtime, "_build_engine", build)
    monkeypatch.setattr(runtime, "_WATCH_INTERVAL_S", 3600.0)  # the tests call restart_if_crashed themselves
    saved = (runtime._engine, runtime._state, runtime._error, runtime._num_starts, runtime._num_restarts,
             runtime._last_crash, list(runtime._restart_times), list(runtime._startup_hooks))
    runtime._engine, runtime._state, runtime._error = None, "stopped", None
    runtime._startup_hooks.clear()  # the apps' hooks (pinning) need a database; these tests add their own
    runtime._restart_times.clear()
    runtime._num_restarts, runtime._last_crash = 0, None
    yield built
    runtime.shutdown()
    (runtime._engine, runtime._state, runtime._error, runtime._num_starts, runtime._num_restarts,
     runtime._last_crash) = saved[:6]
    runtime._restart_times.clear()
    runtime._restart_times.extend(saved[6])
    runtime._startup_hooks[:] = saved[7]
    if runtime._state == "ready":
        runtime._ready.set()


def test_a_crashed_engine_is_replaced_and_its_hooks_run_again(engines):
    started = []
    engine_runtime.add_startup_hook(started.append)
    first = engine_runtime.get_engine()
    assert runtime.restart_if_crashed() is False  # alive: nothing to do
    first.error = "engine loop crashed: boom"
    with pytest.raises(engine_runtime.EngineUnavailable, match="boom"):
        engine_runtime.get_engine()
    assert engine_runtime.status()["state"] == "dead"
    assert runtime.restart_if_crashed() is True
    second = engine_runtime.get_engine()
    assert second is not first and first.stopped and started == [first, second]
    status = engine_runtime.status()
    assert (status["state"], status["num_restarts"], status["last_crash"]) == ("ready", 1, "engine loop crashed: boom")


def test_past_the_budget_the_engine_stays_dead_for_the_supervisor(engines):
    engine_runtime.get_engine()
    for _ in range(2):
        engines[-1].error = "crash"
        assert runtime.restart_if_crashed() is True
    engines[-1].error = "crash again"
    assert runtime.restart_if_crashed() is False
    assert len(engines) == 3 and engine_runtime.status()["state"] == "dead"
    runtime._restart_times[0] -= runtime._RESTART_WINDOW_S + 1  # an hour later, the budget is back
    assert runtime.restart_if_crashed() is True and len(engines) == 4


def test_zero_means_never_restart(engines, settings):
    settings.PAGODA_ENGINE_MAX_RESTARTS = 0
    engine_runtime.get_engine().error = "crash"
    assert runtime.restart_if_crashed() is False and len(engines) == 1


def test_a_shutdown_is_not_a_crash(engines):
    engine = engine_runtime.get_engine()
    engine.shutdown()  # the loop stopped on purpose (error stays None)
    assert runtime.restart_if_crashed() is False and len(engines) == 1
    engine_runtime.shutdown()
    assert runtime.restart_if_crashed() is False and engine_runtime.status()["state"] == "stopped"
