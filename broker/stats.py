"""Message counters behind GET_BROKER_RUNTIME_INFO (msgPutTotalTodayNow, putTps, ...)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class BrokerStats:
    boot_timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    put_messages: int = 0
    put_bytes: int = 0
    get_messages: int = 0
    get_bytes: int = 0
    _last: tuple[float, int, int] = field(default_factory=lambda: (time.monotonic(), 0, 0))

    def record_put(self, count: int, size: int) -> None:
        self.put_messages += count
        self.put_bytes += size

    def record_get(self, count: int, size: int) -> None:
        self.get_messages += count
        self.get_bytes += size

    def tps(self) -> tuple[float, float]:
        """Put and get messages per second since the previous call."""
        now = time.monotonic()
        then, puts, gets = self._last
        self._last = (now, self.put_messages, self.get_messages)
        span = max(now - then, 1e-6)
        return (self.put_messages - puts) / span, (self.get_messages - gets) / span
