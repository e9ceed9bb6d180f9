"""BrokerStats' rates and day totals, and the runtime-info value formats Java's tools parse."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from hypothesis import given
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


def _fake_broker(queues: dict[str, dict[int, int]]) -> SimpleNamespace:
    table = {t: {q: SimpleNamespace(max_offset_in_queue=n) for q, n in qs.items()} for t, qs in queues.items()}
    return SimpleNamespace(message_store=SimpleNamespace(consume_queue_table=table), stats=BrokerStats(),
                           broker_config=SimpleNamespace(brokerClusterName="DefaultCluster"))


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
    assert len(old.minute) == 7
    assert StatsItem.compute(old.minute) == (0, 0.0, 0.0), "nothing put in the last minute"
    assert len(old.hour) == 1 + 1 and len(old.day) == 1 + 1, "hour and day sampled at start-up only"
