"""Allocation strategies: Java's exact assignments, and the properties every split must have."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    MessageQueue,
)

SPLITTING = [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
             AllocateMessageQueueConsistentHash()]


def _queues(n: int, brokers: int = 2) -> list[MessageQueue]:
    return sorted(MessageQueue("T", f"broker-{chr(97 + i % brokers)}", i // brokers) for i in range(n))


def _split(strategy: AllocateMessageQueueStrategy, mqs: list[MessageQueue],
           cids: list[str]) -> list[list[MessageQueue]]:
    return [strategy.allocate("g", cid, mqs, cids) for cid in cids]


def test_averagely_matches_java_blocks() -> None:
    mqs = _queues(8, brokers=1)
    parts = _split(AllocateMessageQueueAveragely(), mqs, ["c0", "c1", "c2"])
    assert [[q.queue_id for q in p] for p in parts] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    # More consumers than queues: one each, the rest idle.
    parts = _split(AllocateMessageQueueAveragely(), mqs[:2], ["c0", "c1", "c2"])
    assert [[q.queue_id for q in p] for p in parts] == [[0], [1], []]


def test_by_circle_is_round_robin() -> None:
    parts = _split(AllocateMessageQueueAveragelyByCircle(), _queues(5, brokers=1), ["a", "b"])
    assert [[q.queue_id for q in p] for p in parts] == [[0, 2, 4], [1, 3]]


def test_client_not_in_list_gets_nothing() -> None:
    for strategy in SPLITTING:
        assert strategy.allocate("g", "stranger", _queues(4), ["a", "b"]) == []


@given(st.integers(1, 40), st.integers(1, 12))
def test_every_queue_assigned_exactly_once(m: int, n: int) -> None:
    mqs = _queues(m)
    cids = sorted(f"10.0.0.{i}@{i}" for i in range(n))
    for strategy in SPLITTING:
        parts = _split(strategy, mqs, cids)
        flat = [q for p in parts for q in p]
        assert sorted(flat) == mqs, strategy.name


@given(st.integers(1, 40), st.integers(1, 12))
def test_even_strategies_are_balanced(m: int, n: int) -> None:
    mqs = _queues(m)
    cids = [f"c{i:02d}" for i in range(n)]
    for strategy in (AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle()):
        sizes = [len(p) for p in _split(strategy, mqs, cids)]
        assert max(sizes) - min(sizes) <= 1


def test_consistent_hash_moves_few_queues_when_a_client_leaves() -> None:
    mqs = _queues(64, brokers=4)
    cids = [f"c{i}" for i in range(8)]
    strategy = AllocateMessageQueueConsistentHash()
    before = {q: cid for cid, p in zip(cids, _split(strategy, mqs, cids), strict=True) for q in p}
    after = {q: cid for cid, p in zip(cids[1:], _split(strategy, mqs, cids[1:]), strict=True) for q in p}
    moved = [q for q in mqs if before[q] != after[q]]
    assert all(before[q] == "c0" for q in moved), "only the leaver's queues move"


def test_config_and_machine_room() -> None:
    fixed = [MessageQueue("T", "b", 3)]
    assert AllocateMessageQueueByConfig(fixed).allocate("g", "x", _queues(4), ["x"]) == fixed
    mqs = sorted([MessageQueue("T", f"{room}@b{i}", q) for room in ("hz", "sh") for i in range(2) for q in range(2)])
    strategy = AllocateMessageQueueByMachineRoom({"hz"})
    parts = _split(strategy, mqs, ["a", "b", "c"])
    assert sorted(q for p in parts for q in p) == [q for q in mqs if q.broker_name.startswith("hz@")]
    assert [len(p) for p in parts] == [2, 1, 1]
