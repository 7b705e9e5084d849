"""The ring buffer behind the console chart, and the console panel that serves it."""
import pytest
from django.urls import reverse

from observability.history import EngineHistory


def _stats(generated: int, used: int, total: int = 100) -> dict:
    return {"generation_tokens_total": generated, "num_blocks_used": used, "num_blocks_total": total,
            "num_running": 1, "num_waiting": 0}


def test_rates_and_kv_use_from_samples():
    history = EngineHistory(window_s=60, min_interval_s=1)
    assert history.record(_stats(0, 10), now=100.0)
    assert not history.record(_stats(5, 10), now=100.5)  # too soon: dropped
    assert history.record(_stats(40, 25), now=102.0)
    assert history.record(_stats(10, 5), now=104.0)  # a new engine: its counter began again
    points = history.series(now=104.0)["points"]
    assert [p["tokens_per_s"] for p in points] == [None, 20.0, 5.0]
    assert [p["kv_usage"] for p in points] == [0.1, 0.25, 0.05]
    assert [p["age_s"] for p in points] == [4.0, 2.0, 0.0]


def test_old_samples_leave_the_window_and_the_buffer_is_bounded():
    history = EngineHistory(window_s=10, min_interval_s=1)
    for second in range(100):
        history.record(_stats(second, 0), now=float(second))
    points = history.series(now=99.0)["points"]
    assert len(points) == 11 and points[0]["age_s"] == 10.0
    assert len(history._samples) <= 12


def test_empty_pool_is_zero_use():
    history = EngineHistory()
    history.record({}, now=1.0)
    assert history.series(now=1.0)["points"][0]["kv_usage"] == 0.0


@pytest.mark.django_db
def test_console_engine_json_carries_kv_use_and_history(real_engine, admin_client):
    data = admin_client.get(reverse("console:engine_stats")).json()
    assert 0 <= data["stats"]["kv_usage"] <= 1
    points = data["history"]["points"]
    assert points and set(points[-1]) >= {"age_s", "tokens_per_s", "kv_usage", "running", "waiting"}
    assert data["history"]["window_s"] > 0
