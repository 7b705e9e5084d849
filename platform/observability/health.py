"""Whether this process can serve chat: the engine is ready, its loop alive (engine_runtime's state)."""
import engine_runtime

# engine_runtime's states other than "ready", as sentences for whoever reads /health.
_REASONS = {
    "off": "the engine is switched off (PAGODA_ENGINE=off)",
    "stopped": "the engine is not running (PAGODA_ENGINE=lazy starts it on the first request)",
    "starting": "the engine is still loading the model",
}


def engine_health() -> tuple[bool, dict]:
    """(healthy, body): body holds status "ok" | "unavailable", the engine's state and model, and
    `reason` when unhealthy. Reads no database and takes no engine lock: cheap enough for probes."""
    status = engine_runtime.status()
    state = status["state"]
    healthy = state == "ready" and status["alive"]
    body = {"status": "ok" if healthy else "unavailable", "engine": state, "model": status["model"],
            "max_model_len": status["max_model_len"], "num_restarts": status.get("num_restarts", 0)}
    if status.get("last_crash"):
        body["last_crash"] = status["last_crash"]  # why the engine was last restarted (or left dead)
    if not healthy:
        if state == "failed":
            body["reason"] = f"the engine failed to start: {status['error']}"
        elif state in ("dead", "ready"):
            body["reason"] = "the engine loop stopped" + (f": {status['error']}" if status["error"] else "")
        else:
            body["reason"] = _REASONS.get(state, f"the engine is {state}")
    return healthy, body
