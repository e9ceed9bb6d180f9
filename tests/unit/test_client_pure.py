"""Client pieces with no I/O: unique ids and latency fault tolerance."""

from __future__ import annotations

import datetime as dt

from client.latency import LatencyFaultTolerance
from client.message_id import MessageClientIDSetter


def test_uniq_id_layout_and_order() -> None:
    setter = MessageClientIDSetter(ip=bytes([192, 168, 0, 1]))
    now = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC).astimezone()
    now_ms = int(now.timestamp() * 1000)
    a = setter.create_uniq_id(now_ms)
    b = setter.create_uniq_id(now_ms + 5)
    assert len(a) == 32 and a == a.upper() and a.startswith("C0A80001")
    assert a[:20] == b[:20], "ip, pid and the per-process part are fixed"
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert int(a[20:28], 16) == now_ms - int(month_start.timestamp() * 1000)
    assert int(b[20:28], 16) == int(a[20:28], 16) + 5
    assert (int(b[28:], 16) - int(a[28:], 16)) % 65536 == 1
    assert len({setter.create_uniq_id(now_ms) for _ in range(1000)}) == 1000


def test_latency_marks_slow_and_failed_brokers() -> None:
    lft = LatencyFaultTolerance()
    assert lft.compute_not_available_duration(40) == 0
    assert lft.compute_not_available_duration(600) == 30000
    assert lft.compute_not_available_duration(20000) == 600000
    lft.update_fault_item("broker-a", 40, now=0)
    assert lft.is_available("broker-a", now=0)
    lft.update_fault_item("broker-b", 0, isolation=True, now=0)  # a failed send counts as 30 s
    assert not lft.is_available("broker-b", now=599)
    assert lft.is_available("broker-b", now=600)
    assert lft.pick_one_at_least(["broker-a", "broker-b"]) == "broker-a"
