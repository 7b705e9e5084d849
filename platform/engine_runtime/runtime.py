"""State machine of the one engine of this process: off | stopped -> starting -> ready | failed -> stopped.

A ready engine whose step loop crashed (engine.error set) is "dead". The watchdog thread, started with
the engine, restarts it (ready -> starting -> ready, start-up hooks re-pin the prompts) at most
PAGODA_ENGINE_MAX_RESTARTS times an hour; past that the engine stays dead and /health answers 503, so
an outside supervisor (systemd, the orchestrator) restarts the process. A shutdown() is not a crash.
"""
import asyncio
import atexit
import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

StartupHook = Callable[[Any], None]


class EngineUnavailable(RuntimeError):
    """The engine cannot serve: switched off, still loading, failed to start, or its loop died.

    `reason` is a sentence for people; the edge maps this to HTTP 503 / a WebSocket error frame.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_lock = threading.Lock()
_ready = threading.Event()  # set when a start attempt has finished (ready or failed)
_engine: Any = None
_state = "stopped"
_error: str | None = None
_num_starts = 0  # engines constructed by this process: a second start() must not add one
_startup_hooks: list[StartupHook] = []
_WATCH_INTERVAL_S = 1.0
_RESTART_WINDOW_S = 3600.0
_restart_times: collections.deque[float] = collections.deque()  # monotonic times of restarts in the window
_num_restarts = 0
_last_crash: str | None = None
_watchdog: threading.Thread | None = None


def add_startup_hook(hook: StartupHook) -> None:
    """Run hook(engine) after every engine start (e.g. pin the tenants' prompts). Registering twice is a no-op."""
    if hook not in _startup_hooks:
        _startup_hooks.append(hook)


_CONNECT_RETRY_S = 0.5
_CONNECT_TIMEOUT_S = 1800.0  # a process sharing another's core waits this long for it to (re)load


def _build_engine() -> Any:
    """Construct the engine from settings (tests replace this to avoid loading a model).

    The engine core runs in a child process. With PAGODA_ENGINE_CONNECT this process instead uses the
    core of another web process of the same server (pagoda.serve), waiting while that one loads it.
    """
    from inference import AsyncLLM, EngineConfig
    from inference.errors import EngineDeadError

    config = EngineConfig(model=settings.PAGODA_MODEL, device=settings.PAGODA_DEVICE, **settings.PAGODA_ENGINE_CONFIG)
    if settings.PAGODA_ENGINE_CONNECT:
        deadline = time.monotonic() + _CONNECT_TIMEOUT_S
        while True:
            try:
                return AsyncLLM(config, connect=settings.PAGODA_ENGINE_CONNECT)
            except EngineDeadError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(_CONNECT_RETRY_S)
    return AsyncLLM(config, progress=False, listen_path=settings.PAGODA_ENGINE_LISTEN)


def start(background: bool = False) -> None:
    """Start the engine unless it is off, starting or running. Safe to call any number of times, from any thread.

    background=True returns at once and loads the model in a thread (the server accepts connections
    meanwhile; get_engine raises EngineUnavailable("... loading") until it is ready).
    """
    global _state, _error
    with _lock:
        if _state in ("starting", "ready"):
            return
        if settings.PAGODA_ENGINE == "off":
            _state = "off"
            return
        _state, _error = "starting", None
        _ready.clear()
    _start_watchdog()
    if background:
        threading.Thread(target=_load, kwargs={"close_db": True}, name="pagoda-engine-start", daemon=True).start()
    else:
        _load(close_db=False)


def _load(close_db: bool) -> None:
    global _engine, _state, _error, _num_starts
    try:
        logger.info("starting engine: model=%s device=%s", settings.PAGODA_MODEL, settings.PAGODA_DEVICE)
        engine = _build_engine()
    except Exception as exc:  # any failure is reported on the console and /health, not raised into the server
        logger.exception("engine failed to start")
        with _lock:
            _state, _error = "failed", f"{type(exc).__name__}: {exc}"
        _ready.set()
        return
    with _lock:
        _engine, _state, _num_starts = engine, "ready", _num_starts + 1
    try:
        for hook in list(_startup_hooks):
            try:
                hook(engine)
            except Exception:
                logger.exception("engine start-up hook %s failed", getattr(hook, "__name__", hook))
    finally:
        if close_db:  # the loader thread's own DB connection must not leak
            connections.close_all()
        _ready.set()
    logger.info("engine ready: %s", getattr(engine, "model_name", settings.PAGODA_MODEL))


def wait_ready(timeout: float | None = None) -> bool:
    """Block until a start attempt finished; True if the engine is ready."""
    if _state in ("starting",):
        _ready.wait(timeout)
    return _state == "ready"


def peek() -> Any:
    """The running engine, or None. Never starts one, never blocks."""
    return _engine if _state == "ready" else None


def _check_alive(engine: Any) -> Any:
    if not engine.is_alive():
        raise EngineUnavailable(f"the engine loop stopped: {engine.error or 'unknown error'}")
    return engine


def get_engine(timeout: float | None = None) -> Any:
    """The running engine; starts it first when PAGODA_ENGINE is lazy (blocking while the model loads).

    Waits up to `timeout` seconds (None: as long as loading takes) for an engine that is starting.
    Raises EngineUnavailable with the reason otherwise.
    """
    engine = peek()
    if engine is not None:
        return _check_alive(engine)
    if settings.PAGODA_ENGINE == "off":
        raise EngineUnavailable("the engine is switched off (PAGODA_ENGINE=off)")
    if _state in ("stopped", "off"):  # "off" from an earlier setting; a failed start is not retried here
        start()
    if not wait_ready(timeout):
        if _state == "starting":
            raise EngineUnavailable("the engine is still loading the model")
        raise EngineUnavailable(f"the engine failed to start: {_error}")
    return _check_alive(_engine)


async def aget_engine(timeout: float | None = None) -> Any:
    """get_engine for async code: a start or wait runs in a thread, so the event loop keeps serving."""
    engine = peek()
    if engine is not None:
        return _check_alive(engine)
    return await asyncio.to_thread(get_engine, timeout)


def status() -> dict:
    """What health and console pages show: state, error, model, context length, whether the loop is alive."""
    engine = peek()
    alive = bool(engine is not None and engine.is_alive())
    return {
        "state": _state if (engine is None or alive) else "dead",
        "error": _error if engine is None else (None if alive else engine.error),
        "model": getattr(engine, "model_name", None) or settings.PAGODA_MODEL,
        "max_model_len": getattr(engine, "max_model_len", None),
        "alive": alive,
        "num_starts": _num_starts,
        "num_restarts": _num_restarts,
        "last_crash": _last_crash,
    }


def shutdown() -> None:
    """Stop the engine (its step thread and KV memory). Idempotent; a later start() builds a new one."""
    global _engine, _state
    with _lock:
        engine, _engine = _engine, None
        if _state != "off":
            _state = "stopped"
        _ready.clear()
    if engine is not None:
        logger.info("shutting the engine down")
        engine.shutdown()


def _start_watchdog() -> None:
    global _watchdog
    with _lock:
        if _watchdog is not None and _watchdog.is_alive():
            return
        _watchdog = threading.Thread(target=_watch, name="pagoda-engine-watchdog", daemon=True)
    _watchdog.start()


def _watch() -> None:
    while True:
        time.sleep(_WATCH_INTERVAL_S)
        try:
            restart_if_crashed()
        except Exception:  # the watchdog must outlive a failed restart
            logger.exception("engine watchdog failed")


def restart_if_crashed() -> bool:
    """Replace a crashed engine (its loop died with an error) by a new one, within the restart budget.

    Returns True if it restarted the engine. Called by the watchdog every second; blocking while the
    new engine loads (requests meanwhile get EngineUnavailable "still loading", /health 503).
    """
    global _engine, _state, _num_restarts, _last_crash
    now = time.monotonic()
    with _lock:
        engine = _engine
        if _state != "ready" or engine is None or getattr(engine, "error", None) is None:
            return False  # running, stopping, or stopped on purpose: nothing to do
        while _restart_times and now - _restart_times[0] > _RESTART_WINDOW_S:
            _restart_times.popleft()
        if len(_restart_times) >= settings.PAGODA_ENGINE_MAX_RESTARTS:
            if _last_crash != engine.error:
                logger.error("engine loop crashed (%s); %d restarts in the last hour: leaving it to the "
                             "supervisor (/health is 503)", engine.error, len(_restart_times))
            _last_crash = engine.error
            return False
        _restart_times.append(now)
        _num_restarts += 1
        _last_crash = engine.error
        _engine, _state = None, "starting"
        _ready.clear()
    logger.error("engine loop crashed (%s): restarting the engine (restart %d)", engine.error, _num_restarts)
    engine.shutdown()  # its loop has ended; this only drops the model and the KV cache
    _load(close_db=True)
    return True


atexit.register(shutdown)
