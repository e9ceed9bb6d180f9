"""Latency bookkeeping for mqbench: a per-second window (TPS, average and max RT, as RocketMQ's
benchmark prints every second) and the whole run's samples for the final percentiles."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Window:
    count: int = 0
    failed: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0


def percentile(sorted_samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of already sorted samples; 0 when there are none."""
    if not sorted_samples:
        return 0.0
    rank = max(math.ceil(q * len(sorted_samples)), 1)
    return sorted_samples[min(rank, len(sorted_samples)) - 1]


@dataclass
class LatencyRecorder:
    samples: list[float] = field(default_factory=list)
    failed: int = 0
    window: Window = field(default_factory=Window)

    def record(self, rt_ms: float, messages: int = 1) -> None:
        """One answered request carrying ``messages`` messages (a batch counts each of them)."""
        self.samples.append(rt_ms)
        w = self.window
        w.count += messages
        w.total_ms += rt_ms * messages
        w.max_ms = max(w.max_ms, rt_ms)

    def record_failure(self, messages: int = 1) -> None:
        self.failed += messages
        self.window.failed += messages

    def roll(self) -> Window:
        """Close the current window (one second's figures) and start the next."""
        closed, self.window = self.window, Window()
        return closed

    def summary(self, messages: int, elapsed: float) -> dict[str, float | int]:
        ordered = sorted(self.samples)
        return {
            "messages": messages, "failed": self.failed, "elapsedSeconds": round(elapsed, 3),
            "tps": round(messages / elapsed, 1) if elapsed > 0 else 0.0,
            "avgRtMs": round(sum(ordered) / len(ordered), 3) if ordered else 0.0,
            "maxRtMs": round(ordered[-1], 3) if ordered else 0.0,
            "p50RtMs": round(percentile(ordered, 0.50), 3), "p99RtMs": round(percentile(ordered, 0.99), 3),
            "p999RtMs": round(percentile(ordered, 0.999), 3),
        }
