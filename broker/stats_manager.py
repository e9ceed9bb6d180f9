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

A tick costs the items that changed, not every item: Java samples all of them, and 10,000
topics of 8 queues took 70 to 90 ms of the event loop every 10 s (the queues summed, the
items' snapshots appended). Only the topics written since the last tick are summed
(ConsumeQueueStore.written_topics), and an item whose figures did not change is skipped; when
it changes or is read, the snapshots it missed are appended first, with its old figures and the
missed ticks' times, so its windows are what sampling it every tick would have made.
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
        # The last tick of BrokerStatsManager whose snapshots it holds.
        self.tick = -1

    @staticmethod
    def append_snapshot(snapshots: deque[CallSnapshot], now_ms: int, period_ms: int, times: int, value: int) -> None:
        if not snapshots:
            snapshots.append(CallSnapshot(now_ms - period_ms, 0, 0))
        snapshots.append(CallSnapshot(now_ms, times, value))

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
        # (tick, time) of the last ticks each window can still hold, for items catching up.
        self._seconds: deque[tuple[int, int]] = deque(maxlen=7)
        self._minutes: deque[tuple[int, int]] = deque(maxlen=7)
        self._hours: deque[tuple[int, int]] = deque(maxlen=25)

    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        """The item with every tick's snapshots (caught up)."""
        item = self.tables.get(name, {}).get(key)
        if item is not None:
            self._catch_up(item, self._ticks - 1)
        return item

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second pulled by ``group`` from ``topic`` over the last minute."""
        item = self.get_stats_item(GROUP_GET_NUMS, f"{topic}@{group}")
        return StatsItem.compute(item.minute).tps if item else 0.0

    def _catch_up(self, item: StatsItem, upto: int) -> None:
        """The snapshots of the ticks after ``item.tick`` up to ``upto`` appended with its
        figures as they are (unchanged since: a change is sampled at its tick)."""
        last = item.tick
        if last >= upto:
            return
        times, value = item.times, item.value
        for ticks, snapshots, period in ((self._seconds, item.minute, 10_000), (self._minutes, item.hour, 600_000),
                                         (self._hours, item.day, 3_600_000)):
            for tick, now_ms in ticks:
                if last < tick <= upto:
                    StatsItem.append_snapshot(snapshots, now_ms, period, times, value)
        item.tick = upto

    def refresh(self) -> list[tuple[StatsItem, int, int]]:
        """The items whose figures the broker's counters and queues have changed, with their new
        ``times`` and ``value`` (new items included): the topics written since the last tick,
        the groups' pulls and the broker's totals."""
        broker = self.broker
        cqs = broker.message_store.consume_queue_store
        totals = cqs.queue_totals(cqs.written_topics())
        if self._put_baseline is None:
            self._put_baseline = totals
        changed: list[tuple[StatsItem, int, int]] = []

        def update(name: str, key: str, times: int, value: int) -> None:
            item = self.tables[name].get(key)
            if item is None:
                item = self.tables[name][key] = StatsItem()
                item.tick = self._ticks - 1  # first sampled at this tick, from a zero snapshot
            elif item.times == times and item.value == value:
                return
            changed.append((item, times, value))

        baseline = self._put_baseline
        topic_items = self.tables[TOPIC_PUT_NUMS]
        for topic, total in totals.items():
            item = topic_items.get(topic)
            if item is None or item.value != total - baseline.get(topic, 0):  # most written topics
                update(TOPIC_PUT_NUMS, topic, 0, max(total - baseline.get(topic, 0), 0))
        stats = broker.stats
        for key, (messages, size, times) in stats.group_gets.items():
            update(GROUP_GET_NUMS, key, times, messages)
            update(GROUP_GET_SIZE, key, times, size)
        cluster = broker.broker_config.brokerClusterName
        update(BROKER_PUT_NUMS, cluster, 0, stats.put_messages)
        update(BROKER_GET_NUMS, cluster, stats.get_found_times, stats.get_messages)
        return changed

    def sample(self, now_ms: int | None = None) -> None:
        """One 10-second tick: the minute snapshot, and the hour and day ones when due, of every
        item that changed (the others catch up when they change or are read)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        changed = self.refresh()
        tick, self._ticks = self._ticks, self._ticks + 1
        self._seconds.append((tick, now_ms))
        if tick % MINUTES_TICKS == 0:
            self._minutes.append((tick, now_ms))
        if tick % HOUR_TICKS == 0:
            self._hours.append((tick, now_ms))
        for item, times, value in changed:
            self._catch_up(item, tick - 1)
            item.times, item.value = times, value
            self._catch_up(item, tick)

    async def run(self, period: float = SECONDS_PERIOD) -> None:
        """The sampler, from start-up until cancelled."""
        while True:
            self.sample()
            await asyncio.sleep(period)
