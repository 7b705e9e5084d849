"""/health: 200 when the engine serves, 503 with the reason otherwise (tiny real engine, stopped here)."""
import engine_runtime
from engine_runtime import runtime
from obs_testing import metric, parse_metrics
from runtime_testing import runtime_set_aside


def _health(client):
    response = client.get("/health")
    return response.status_code, response.json()


def test_200_when_ready_then_503_when_the_loop_stops_then_when_shut_down(tiny_runtime, client):
    engine = engine_runtime.get_engine()
    code, body = _health(client)
    assert code == 200 and body["status"] == "ok" and body["engine"] == "ready"
    assert body["model"] == engine.model_name and "reason" not in body
    assert metric(parse_metrics(client.get("/metrics").content.decode()), "pagoda_engine_up") == 1

    engine.shutdown()  # the step loop ends while engine_runtime still holds the engine
    code, body = _health(client)
    assert code == 503 and body["status"] == "unavailable" and body["engine"] == "dead"
    assert "loop stopped" in body["reason"]
    assert metric(parse_metrics(client.get("/metrics").content.decode()), "pagoda_engine_up") == 0

    engine_runtime.shutdown()
    code, body = _health(client)
    assert code == 503 and body["engine"] == "stopped" and "not running" in body["reason"]


def test_503_while_loading_after_a_failed_start_and_when_off(client, settings, monkeypatch):
    with runtime_set_aside():
        runtime._state = "starting"
        code, body = _health(client)
        assert code == 503 and "loading" in body["reason"]

    def broken():
        raise RuntimeError("no such model")

    monkeypatch.setattr(runtime, "_build_engine", broken)
    settings.PAGODA_ENGINE = "lazy"
    with runtime_set_aside():
        engine_runtime.start()
        code, body = _health(client)
        assert code == 503 and body["engine"] == "failed"
        assert body["reason"] == "the engine failed to start: RuntimeError: no such model"

    settings.PAGODA_ENGINE = "off"
    with runtime_set_aside():
        engine_runtime.start()
        code, body = _health(client)
        assert code == 503 and body["engine"] == "off" and "PAGODA_ENGINE=off" in body["reason"]


def test_health_is_public_and_never_cached(client, settings):
    settings.PAGODA_METRICS_ALLOWED_IPS = []
    with runtime_set_aside():
        response = client.get("/health", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 503  # unavailable, not forbidden
    assert "no-cache" in response["Cache-Control"]
    assert client.post("/health").status_code == 405
