"""A small in-process ring buffer of engine samples, for the console's throughput / KV-use chart.

Samples are taken when someone looks (a console panel poll, a /metrics scrape), at most one per
`min_interval_s`, and kept for `window_s`; nobody looking costs nothing. Per process: with several
server processes each panel shows the engine of the process that answered, which is the only one
it could read anyway.
"""
import threading
import time
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    wall_time: float  # time.time(), for people
    mono_time: float  # time.monotonic(), for rates
    generation_tokens_total: int
    kv_usage: float  # 0..1
    num_running: int
    num_waiting: int


class EngineHistory:
    """Thread-safe ring buffer of Samples; `series()` turns them into chart points."""

    def __init__(self, window_s: float = 600.0, min_interval_s: float = 1.0):
        self.window_s = window_s
        self.min_interval_s = min_interval_s
        self._samples: deque[Sample] = deque(maxlen=int(window_s / min_interval_s) + 2)
        self._lock = threading.Lock()

    def record(self, stats: dict, now: float | None = None, wall: float | None = None) -> bool:
        """Add a sample from engine.stats() unless the last one is younger than min_interval_s."""
        now = time.monotonic() if now is None else now
        total = stats.get("num_blocks_total") or 0
        sample = Sample(
            wall_time=time.time() if wall is None else wall,
            mono_time=now,
            generation_tokens_total=int(stats.get("generation_tokens_total") or 0),
            kv_usage=(stats.get("num_blocks_used") or 0) / total if total else 0.0,
            num_running=int(stats.get("num_running") or 0),
            num_waiting=int(stats.get("num_waiting") or 0),
        )
        with self._lock:
            if self._samples and now - self._samples[-1].mono_time < self.min_interval_s:
                return False
            self._samples.append(sample)
        return True

    def series(self, now: float | None = None) -> dict:
        """{"window_s", "points": [{"age_s", "time", "tokens_per_s", "kv_usage", "running", "waiting"}]}.

        Oldest first; `tokens_per_s` is the mean generation rate since the previous sample (None for
        the first point); a counter that went down (a new engine) counts from zero.
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            samples = [s for s in self._samples if now - s.mono_time <= self.window_s]
        points, previous = [], None
        for s in samples:
            rate = None
            if previous is not None and s.mono_time > previous.mono_time:
                delta = s.generation_tokens_total - previous.generation_tokens_total
                if delta < 0:  # the engine was restarted: its counter began again at zero
                    delta = s.generation_tokens_total
                rate = round(delta / (s.mono_time - previous.mono_time), 2)
            points.append({"age_s": round(now - s.mono_time, 1), "time": round(s.wall_time, 1),
                           "tokens_per_s": rate, "kv_usage": round(s.kv_usage, 4),
                           "running": s.num_running, "waiting": s.num_waiting})
            previous = s
        return {"window_s": self.window_s, "points": points}

    def clear(self) -> None:
        with self._lock:
            self._samples.clear()


engine_history = EngineHistory()
