"""Latency fault tolerance for producers (``sendLatencyFaultEnable``, docs/behaviours.md#producer).

A send that took L ms (30 000 when it failed) marks its broker unavailable for
``notAvailableDuration[i]``, with i the largest index where L >= ``latencyMax[i]``; queue
selection then skips unavailable brokers while any other remains, so one slow or dead broker
stops taking a share of every producer's traffic.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
FAILED_SEND_LATENCY = 30000


class LatencyFaultTolerance:
    def __init__(self, latency_max: tuple[int, ...] = LATENCY_MAX,
                 not_available_duration: tuple[int, ...] = NOT_AVAILABLE_DURATION) -> None:
        self.latency_max = latency_max
        self.not_available_duration = not_available_duration
        # broker name -> (latency ms, available again at monotonic seconds)
        self._faults: dict[str, tuple[int, float]] = {}

    def compute_not_available_duration(self, latency_ms: int) -> int:
        for i in range(len(self.latency_max) - 1, -1, -1):
            if latency_ms >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0

    def update_fault_item(self, broker_name: str, latency_ms: int, isolation: bool = False,
                          now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        latency = FAILED_SEND_LATENCY if isolation else latency_ms
        duration = self.compute_not_available_duration(latency)
        self._faults[broker_name] = (latency, now + duration / 1000)

    def is_available(self, broker_name: str, now: float | None = None) -> bool:
        fault = self._faults.get(broker_name)
        return fault is None or (time.monotonic() if now is None else now) >= fault[1]

    def remove(self, broker_name: str) -> None:
        self._faults.pop(broker_name, None)

    def pick_one_at_least(self, candidates: Iterable[str]) -> str | None:
        """When every broker is marked down, the least bad one (lowest latency, soonest back)."""
        known = sorted((self._faults[b][1], self._faults[b][0], b) for b in candidates if b in self._faults)
        if not known:
            return None
        best = known[: max(1, len(known) // 2)]
        return random.choice(best)[2]
