"""BrokerStats' rates and day totals, and the runtime-info value formats Java's tools parse."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.broker.runtime_info import human_readable_bytes
from rocketmq_py.broker.stats import GET_TRANSFERRED, PUT, BrokerStats, format_runtime, next_morning_millis
from rocketmq_py.broker.stats_manager import GROUP_GET_NUMS, TOPIC_PUT_NUMS, BrokerStatsManager, StatsItem


def test_tps_windows_fill_as_samples_arrive() -> None:
    stats = BrokerStats()
    t0 = 1_700_000_000_000
    for second in range(61):
        stats.sample(t0 + second * 1000)
        stats.record_put(5, 500)  # 5 messages a second
    # 61 snapshots: the 10 s and 60 s windows are full, the 600 s one is not.
    assert stats.tps_text(PUT) == "5.0 5.0 "
    assert stats.tps_text(GET_TRANSFERRED) == "0.0 0.0 "


def test_tps_over_the_last_window_only() -> None:
    stats = BrokerStats()
    t0 = 0
    for second in range(601):
        if second > 590:
            stats.record_put(10, 1)
        stats.sample(t0 + second * 1000)
    ten, sixty, six_hundred = (float(x) for x in stats.tps_text(PUT).split(" "))
    assert ten == 10.0
    assert sixty == 100 / 60
    assert six_hundred == 100 / 600


def test_total_get_tps_adds_found_and_miss() -> None:
    stats = BrokerStats()
    for second in range(11):
        stats.sample(second * 1000)
        stats.record_get(3, 30, "g", "t")
        stats.record_miss()
        stats.record_miss()
    # found 1/s + missed 2/s over the full 10 s window; the others are not full, so 0.0 each.
    assert stats.total_get_tps_text() == "3.0 0.0 0.0"
    assert stats.get_messages == 33


def test_sampler_keeps_601_snapshots() -> None:
    stats = BrokerStats()
    for second in range(1000):
        stats.sample(second * 1000)
    assert len(stats.samples) == 601


def test_record_rolls_today_into_yesterday() -> None:
    stats = BrokerStats()
    stats.record_put(7, 70)
    stats.record_get(2, 20, "g", "t")
    stats.record()
    assert (stats.msg_put_total_today_morning, stats.msg_get_total_today_morning) == (7, 2)
    assert (stats.msg_put_total_yesterday_morning, stats.msg_get_total_yesterday_morning) == (0, 0)
    stats.record_put(3, 30)
    stats.record()
    assert (stats.msg_put_total_yesterday_morning, stats.msg_put_total_today_morning) == (7, 10)


@given(st.integers(min_value=0, max_value=4_000_000_000_000))
def test_next_morning_is_the_next_local_midnight(now_ms: int) -> None:
    morning = next_morning_millis(now_ms)
    local = dt.datetime.fromtimestamp(morning / 1000)
    assert (local.hour, local.minute, local.second, local.microsecond) == (0, 0, 0, 0)
    assert now_ms < morning <= now_ms + 25 * 3600 * 1000


def test_runtime_format_is_javas() -> None:
    assert format_runtime(((2 * 24 + 3) * 3600 + 4 * 60 + 5) * 1000 + 999) == \
        "[ 2 days, 3 hours, 4 minutes, 5 seconds ]"


def test_human_readable_bytes_as_mixall() -> None:
    assert human_readable_bytes(0) == "0 B"
    assert human_readable_bytes(1023) == "1023 B"
    assert human_readable_bytes(1024) == "1.0 KiB"
    assert human_readable_bytes(1536) == "1.5 KiB"
    assert human_readable_bytes(5 * 1024**3) == "5.0 GiB"


def _totals(table: dict[str, dict[int, SimpleNamespace]], topics: set[str]) -> dict[str, int]:
    """ConsumeQueueStore.queue_totals of a fake table (the real one: test_consume_queue_flush.py)."""
    return {t: sum(cq.max_offset_in_queue for cq in table[t].values()) for t in topics if t in table}


def _fake_broker(queues: dict[str, dict[int, int]]) -> SimpleNamespace:
    """A broker whose store names every topic as written (``written_topics``)."""
    table = {t: {q: SimpleNamespace(max_offset_in_queue=n) for q, n in qs.items()} for t, qs in queues.items()}
    return SimpleNamespace(message_store=SimpleNamespace(
        consume_queue_table=table, consume_queue_store=SimpleNamespace(
            written_topics=lambda: set(table), queue_totals=lambda topics: _totals(table, topics))),
        stats=BrokerStats(), broker_config=SimpleNamespace(brokerClusterName="DefaultCluster"))


def test_stats_items_over_the_minute() -> None:
    broker = _fake_broker({"Old": {0: 100}})
    manager = BrokerStatsManager(broker)  # type: ignore[arg-type]
    manager.sample(1_000_000)  # start-up: Old's 100 messages were there before
    broker.message_store.consume_queue_table["Old"][0].max_offset_in_queue = 130
    broker.message_store.consume_queue_table["New"] = {0: SimpleNamespace(max_offset_in_queue=20)}
    broker.stats.record_get(8, 800, "g", "Old")
    broker.stats.record_get(2, 200, "g", "Old")
    manager.sample(1_010_000)
    old = manager.get_stats_item(TOPIC_PUT_NUMS, "Old")
    assert old is not None and StatsItem.compute(old.minute) == (30, 1.5, 0.0)  # over 20 s: a zero, 0, 30
    new = manager.get_stats_item(TOPIC_PUT_NUMS, "New")
    assert new is not None
    # First seen now: a zero snapshot 10 s back, as Java's StatsItem starts a list.
    assert StatsItem.compute(new.minute) == (20, 2.0, 0.0)
    got = manager.get_stats_item(GROUP_GET_NUMS, "Old@g")
    assert got is not None and StatsItem.compute(got.minute) == (10, 1.0, 5.0)
    assert manager.tps_group_get_nums("g", "Old") == 1.0
    assert manager.tps_group_get_nums("g", "Nothing") == 0.0
    assert manager.get_stats_item(TOPIC_PUT_NUMS, "Nothing") is None
    for tick in range(2, 12):  # the minute keeps 7 snapshots: the oldest fall out
        manager.sample(1_000_000 + tick * 10_000)
    old = manager.get_stats_item(TOPIC_PUT_NUMS, "Old")
    assert old is not None and len(old.minute) == 7
    assert StatsItem.compute(old.minute) == (0, 0.0, 0.0), "nothing put in the last minute"
    assert len(old.hour) == 1 + 1 and len(old.day) == 1 + 1, "hour and day sampled at start-up only"


class _Eager:
    """Java's StatsItemSet as it samples: every item at every tick (the reference the manager's
    skipping of unchanged items must match)."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[int, int, list[list[tuple[int, int, int]]]]] = {}
        self.ticks = 0

    def sample(self, figures: dict[str, tuple[int, int]], now_ms: int) -> None:
        for key, (times, value) in figures.items():
            old = self.items.get(key)
            self.items[key] = (times, value, old[2] if old else [[], [], []])
        tick, self.ticks = self.ticks, self.ticks + 1
        for times, value, windows in self.items.values():
            for snapshots, period, every, keep in zip(windows, (10_000, 600_000, 3_600_000), (1, 60, 360), (7, 7, 25),
                                                      strict=True):
                if tick % every == 0:
                    if not snapshots:
                        snapshots.append((now_ms - period, 0, 0))
                    snapshots.append((now_ms, times, value))
                    del snapshots[:-keep]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.booleans()), min_size=1, max_size=800),
       st.sets(st.integers(0, 799), max_size=10))
def test_items_skipped_while_unchanged_read_as_if_sampled_every_tick(
        ticks: list[tuple[int, int, bool]], reads: set[int]) -> None:
    """Ticks of writes to a few of the topics (most ticks none): whenever read, an item's minute,
    hour and day windows are those of sampling every item at every tick, and a tick samples only
    the items that changed."""
    table: dict[str, dict[int, SimpleNamespace]] = {}
    written: set[str] = set()

    def written_topics() -> set[str]:
        nonlocal written
        out, written = written, set()
        return out

    broker = SimpleNamespace(message_store=SimpleNamespace(
        consume_queue_table=table, consume_queue_store=SimpleNamespace(
            written_topics=written_topics, queue_totals=lambda topics: _totals(table, topics))),
        stats=BrokerStats(), broker_config=SimpleNamespace(brokerClusterName="C"))
    manager = BrokerStatsManager(broker)  # type: ignore[arg-type]
    eager = _Eager()
    baseline: dict[str, int] = {}
    for tick, (topic_no, count, pull) in enumerate(ticks):
        now_ms = 1_000_000 + tick * 10_000 + tick % 3  # ticks are not exactly 10 s apart
        if count:
            topic = f"T{topic_no}"
            queue = table.setdefault(topic, {}).setdefault(0, SimpleNamespace(max_offset_in_queue=0))
            queue.max_offset_in_queue += count
            written.add(topic)
        if pull:
            broker.stats.record_get(1, 10, "g", f"T{topic_no}")
        if tick == 0:  # what the queues held at the first tick is not counted as put (start-up)
            baseline = {t: qs[0].max_offset_in_queue for t, qs in table.items()}
        figures = {f"{TOPIC_PUT_NUMS}/{t}": (0, qs[0].max_offset_in_queue - baseline.get(t, 0))
                   for t, qs in table.items()}
        figures.update({f"{GROUP_GET_NUMS}/{k}": (c[2], c[0]) for k, c in broker.stats.group_gets.items()})
        manager.sample(now_ms)
        eager.sample(figures, now_ms)
        sampled = sum(item.tick == tick for t in manager.tables.values() for item in t.values())
        assert sampled <= bool(count) + 2 * pull + 2, "only the items that changed (the broker's two at most)"
        if tick in reads or tick == len(ticks) - 1:
            for key, (_times, _value, windows) in eager.items.items():
                name, item_key = key.split("/")
                item = manager.get_stats_item(name, item_key)
                assert item is not None
                assert [list(item.minute), list(item.hour), list(item.day)] == windows, (key, tick)
