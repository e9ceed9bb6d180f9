"""The broker's message counters and their rates: Java's StoreStatsService and BrokerStats in one.

Counted where our broker handles messages (the send and pull processors), read by
GET_BROKER_RUNTIME_INFO (``broker.runtime_info``) and the metrics scrape. As in Java, a
sampler takes a snapshot of the totals once a second and keeps the last 601, so that the
TPS figures are over the last 10, 60 and 600 seconds (docs/admin-codes.md, runtime info),
and the totals are noted at every local midnight (``msgPutTotalTodayMorning`` ...).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import deque
from dataclasses import dataclass, field

# StoreStatsService: one snapshot a second, 600 seconds of them (plus the one they start from).
SAMPLING_PERIOD = 1.0
MAX_RECORDS_OF_SAMPLING = 600
TPS_WINDOWS = (10, 60, 600)

# The columns of a snapshot after its timestamp.
PUT, GET_FOUND, GET_MISS, GET_TRANSFERRED = range(4)


def _now_ms() -> int:
    return int(time.time() * 1000)


def next_morning_millis(now_ms: int) -> int:
    """The next local midnight after ``now_ms`` (Java's UtilAll.computeNextMorningTimeMillis):
    when the day's totals are noted."""
    now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    morning = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), tzinfo=now.tzinfo)
    # Re-localise: a DST change between now and midnight moves the offset.
    return int(morning.replace(tzinfo=None).astimezone().timestamp() * 1000)


def format_runtime(millis: int) -> str:
    """The broker's uptime as Java's StoreStatsService.getFormatRuntime writes it."""
    seconds_total = max(millis, 0) // 1000
    days, rest = divmod(seconds_total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"[ {days:,} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


@dataclass
class BrokerStats:
    boot_timestamp: int = field(default_factory=_now_ms)
    put_messages: int = 0
    put_bytes: int = 0
    # Sends the store refused (Java's putMessageFailedTimes: any put that did not end stored).
    put_failed_times: int = 0
    # Messages and bytes handed to pulls (Java's getMessageTransferedMsgCount).
    get_messages: int = 0
    get_bytes: int = 0
    # Pulls that found messages / found none (Java's getMessageTimesTotalFound / Miss).
    get_found_times: int = 0
    get_miss_times: int = 0
    # "topic@group" -> [messages, bytes, pulls] handed to that group (Java's GROUP_GET_NUMS/SIZE).
    group_gets: dict[str, list[int]] = field(default_factory=dict)
    # (group, origin topic) -> messages a send-back moved to the group's DLQ (RocketMQ 5's
    # rocketmq_send_to_dlq_messages_total; rare, so counted whether or not metrics are on).
    dlq_messages: dict[tuple[str, str], int] = field(default_factory=dict)
    msg_put_total_yesterday_morning: int = 0
    msg_put_total_today_morning: int = 0
    msg_get_total_yesterday_morning: int = 0
    msg_get_total_today_morning: int = 0
    # (timestamp ms, puts, found pulls, missed pulls, messages transferred), oldest first.
    samples: deque[tuple[int, int, int, int, int]] = field(
        default_factory=lambda: deque(maxlen=MAX_RECORDS_OF_SAMPLING + 1))

    def record_put(self, count: int, size: int) -> None:
        self.put_messages += count
        self.put_bytes += size

    def record_get(self, count: int, size: int, group: str, topic: str) -> None:
        """A pull by ``group`` that found ``count`` messages of ``size`` bytes in ``topic``."""
        self.get_found_times += 1
        self.get_messages += count
        self.get_bytes += size
        key = f"{topic}@{group}"
        counts = self.group_gets.get(key)
        if counts is None:
            counts = self.group_gets[key] = [0, 0, 0]
        counts[0] += count
        counts[1] += size
        counts[2] += 1

    def record_miss(self) -> None:
        """A pull answered without messages."""
        self.get_miss_times += 1

    # -- rates --------------------------------------------------------------------------------

    def sample(self, now_ms: int | None = None) -> None:
        """One snapshot of the totals (the sampler's tick)."""
        self.samples.append((_now_ms() if now_ms is None else now_ms, self.put_messages, self.get_found_times,
                             self.get_miss_times, self.get_messages))

    def _tps(self, column: int, window: int) -> float | None:
        """Per second over the last ``window`` snapshots; None until there are that many."""
        samples = self.samples
        if len(samples) <= window:
            return None
        last, before = samples[-1], samples[-1 - window]
        span = last[0] - before[0]
        return (last[column + 1] - before[column + 1]) / span * 1000 if span > 0 else 0.0

    def tps_text(self, column: int) -> str:
        """The 10 s, 60 s and 600 s rates space-separated, each empty until the sampler has run
        that long: the form of Java's ``putTps`` / ``getFoundTps`` / ``getMissTps`` /
        ``getTransferedTps``, whose first figure ``mqadmin clusterList`` prints."""
        return " ".join("" if (tps := self._tps(column, w)) is None else repr(tps) for w in TPS_WINDOWS)

    def total_get_tps_text(self) -> str:
        """``getTotalTps``: found plus missed pulls per second, 0.0 where a window is not full
        yet (Java adds the two with 0 for a missing one)."""
        return " ".join(repr((self._tps(GET_FOUND, w) or 0.0) + (self._tps(GET_MISS, w) or 0.0))
                        for w in TPS_WINDOWS)

    # -- day totals ---------------------------------------------------------------------------

    def record(self) -> None:
        """Note the totals at a day's start (Java's BrokerStats.record, run at local midnight):
        today's morning figures become yesterday's."""
        self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
        self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
        self.msg_put_total_today_morning = self.put_messages
        self.msg_get_total_today_morning = self.get_messages

    # -- the periodic services ----------------------------------------------------------------

    async def run_sampling(self, period: float = SAMPLING_PERIOD) -> None:
        """The sampler: one snapshot now and then every ``period`` seconds, until cancelled."""
        while True:
            self.sample()
            await asyncio.sleep(period)

    async def run_morning_records(self) -> None:
        """``record`` at every local midnight, until cancelled."""
        morning = next_morning_millis(_now_ms())
        while True:
            await asyncio.sleep(max(morning - _now_ms(), 0) / 1000)
            # A timer may fire a little early: record only once the day has really turned, so
            # that each midnight is recorded once.
            if _now_ms() >= morning:
                self.record()
                morning = next_morning_millis(morning)
