"""Per-topic and per-group sums over the last minute, hour and day: Java's BrokerStatsManager,
behind VIEW_BROKER_STATS_DATA (``mqadmin statsAll``) and the ``consumeTps`` of consume stats.

Each item keeps a value (messages or bytes) and a count of calls; snapshots are taken every
10 s (7 kept: the minute), every 10 min (7 kept: the hour) and every hour (25 kept: the day),
the first of each list preceded by a zero snapshot one period back, as Java's StatsItem does.
A window's figures come from its first and last snapshot (docs/admin-codes.md).

What the send path would have to count per topic is read from the consume queues instead
(their max offsets are the messages stored per topic, counted from start-up), so sends pay
nothing; those items have no call count and an ``avgpt`` of 0. Pulls count per group and topic
in BrokerStats (``record_get``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"

SECONDS_PERIOD = 10.0
# Sampling ticks (of SECONDS_PERIOD) between hour and day snapshots: 10 min and 1 h.
MINUTES_TICKS = 60
HOUR_TICKS = 360


class CallSnapshot(NamedTuple):
    timestamp: int
    times: int
    value: int


class StatsSnapshot(NamedTuple):
    sum: int
    tps: float
    avgpt: float


def _now_ms() -> int:
    return int(time.time() * 1000)


class StatsItem:
    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self.minute: deque[CallSnapshot] = deque(maxlen=7)
        self.hour: deque[CallSnapshot] = deque(maxlen=7)
        self.day: deque[CallSnapshot] = deque(maxlen=25)

    @staticmethod
    def _sample(snapshots: deque[CallSnapshot], now_ms: int, period_ms: int, times: int, value: int) -> None:
        if not snapshots:
            snapshots.append(CallSnapshot(now_ms - period_ms, 0, 0))
        snapshots.append(CallSnapshot(now_ms, times, value))

    def sampling_in_seconds(self, now_ms: int) -> None:
        self._sample(self.minute, now_ms, 10_000, self.times, self.value)

    def sampling_in_minutes(self, now_ms: int) -> None:
        self._sample(self.hour, now_ms, 600_000, self.times, self.value)

    def sampling_in_hour(self, now_ms: int) -> None:
        self._sample(self.day, now_ms, 3_600_000, self.times, self.value)

    @staticmethod
    def compute(snapshots: deque[CallSnapshot]) -> StatsSnapshot:
        """Sum, per-second rate and value per call between the window's first and last snapshot."""
        if not snapshots:
            return StatsSnapshot(0, 0.0, 0.0)
        first, last = snapshots[0], snapshots[-1]
        total = last.value - first.value
        span = last.timestamp - first.timestamp
        calls = last.times - first.times
        return StatsSnapshot(total, total * 1000.0 / span if span > 0 else 0.0, total / calls if calls > 0 else 0.0)


class BrokerStatsManager:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.tables: dict[str, dict[str, StatsItem]] = {
            name: {} for name in (TOPIC_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, BROKER_PUT_NUMS, BROKER_GET_NUMS)}
        # Messages each topic's queues held at start-up, not counted as put since then.
        self._put_baseline: dict[str, int] | None = None
        self._ticks = 0

    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        return self.tables.get(name, {}).get(key)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second pulled by ``group`` from ``topic`` over the last minute."""
        item = self.tables[GROUP_GET_NUMS].get(f"{topic}@{group}")
        return StatsItem.compute(item.minute).tps if item else 0.0

    def _item(self, name: str, key: str) -> StatsItem:
        table = self.tables[name]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem()
        return item

    def refresh(self) -> None:
        """Items' values brought up to the broker's counters and queues."""
        broker = self.broker
        totals = {topic: sum(cq.max_offset_in_queue for cq in queues.values())
                  for topic, queues in list(broker.message_store.consume_queue_table.items())}
        if self._put_baseline is None:
            self._put_baseline = totals
        for topic, total in totals.items():
            self._item(TOPIC_PUT_NUMS, topic).value = max(total - self._put_baseline.get(topic, 0), 0)
        stats = broker.stats
        for key, (messages, size, times) in stats.group_gets.items():
            nums, sizes = self._item(GROUP_GET_NUMS, key), self._item(GROUP_GET_SIZE, key)
            nums.value, nums.times, sizes.value, sizes.times = messages, times, size, times
        cluster = broker.broker_config.brokerClusterName
        self._item(BROKER_PUT_NUMS, cluster).value = stats.put_messages
        got = self._item(BROKER_GET_NUMS, cluster)
        got.value, got.times = stats.get_messages, stats.get_found_times

    def sample(self, now_ms: int | None = None) -> None:
        """One 10-second tick: every item's minute snapshot, and its hour and day ones when due."""
        now_ms = _now_ms() if now_ms is None else now_ms
        self.refresh()
        ticks, self._ticks = self._ticks, self._ticks + 1
        for table in self.tables.values():
            for item in table.values():
                item.sampling_in_seconds(now_ms)
                if ticks % MINUTES_TICKS == 0:
                    item.sampling_in_minutes(now_ms)
                if ticks % HOUR_TICKS == 0:
                    item.sampling_in_hour(now_ms)

    async def run(self, period: float = SECONDS_PERIOD) -> None:
        """The sampler, from start-up until cancelled."""
        while True:
            self.sample()
            await asyncio.sleep(period)
