"""FlowMonitor: the bytes an HA connection moved in the last whole second (RocketMQ 5's name).

The figure is ``transferredByteInSecond`` of 5.x's HA runtime info (docs/ha.md, operators):
bytes are counted into the current wall-clock second, and the answer is the total of the
second before it, 0 when nothing moved then.
"""

from __future__ import annotations

import time


class FlowMonitor:
    def __init__(self) -> None:
        self._second = 0
        self._count = 0
        self._last_second = 0
        self._last_count = 0
        self.total = 0

    def _roll(self, now: int) -> None:
        if now != self._second:
            self._last_second, self._last_count = self._second, self._count
            self._second, self._count = now, 0

    def add(self, count: int, now: float | None = None) -> None:
        self._roll(int(time.monotonic() if now is None else now))
        self._count += count
        self.total += count

    def transferred_byte_in_second(self, now: float | None = None) -> int:
        second = int(time.monotonic() if now is None else now)
        self._roll(second)
        return self._last_count if self._last_second == second - 1 else 0
