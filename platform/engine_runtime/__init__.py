"""The process-wide inference engine: the only place the platform creates, finds or stops it.

    import engine_runtime
    engine = await engine_runtime.aget_engine()   # in consumers / async views (starts it on first use if lazy)
    engine = engine_runtime.get_engine()          # in sync code; raises EngineUnavailable (map it to 503)
    engine_runtime.peek()                         # the running engine or None; never starts one
    engine_runtime.status()                       # {"state", "error", "model", ...} for health pages

Started once per process (at ASGI start-up when PAGODA_ENGINE=on, on first use when lazy, never when
off), guarded by a lock; shut down at interpreter exit or by shutdown(). A loop that crashes is
restarted by a watchdog thread, at most PAGODA_ENGINE_MAX_RESTARTS times an hour (see runtime).
"""
from engine_runtime.runtime import (
    EngineUnavailable,
    add_startup_hook,
    aget_engine,
    get_engine,
    peek,
    shutdown,
    start,
    status,
    wait_ready,
)

__all__ = [
    "EngineUnavailable",
    "add_startup_hook",
    "aget_engine",
    "get_engine",
    "peek",
    "shutdown",
    "start",
    "status",
    "wait_ready",
]
