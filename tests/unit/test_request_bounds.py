"""Bounds on the counts and names a client controls: a topic's queue counts, group names, and
what the SDK takes from a route (issue 20)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.broker.subscription_group_manager import GROUP_MAX_LENGTH, validate_group
from rocketmq_py.client.instance import bounded_route
from rocketmq_py.client.producer import TopicPublishInfo
from rocketmq_py.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from rocketmq_py.remoting.protocol.topic import MAX_QUEUE_NUMS, queue_nums_problem

COUNTS = st.one_of(st.integers(-3, 20), st.integers(-(2**31), 2**31 - 1),
                   st.sampled_from([MAX_QUEUE_NUMS - 1, MAX_QUEUE_NUMS, MAX_QUEUE_NUMS + 1]))


@given(COUNTS, COUNTS, st.sampled_from([0, 1]))
def test_queue_counts_are_refused_outside_their_bounds_naming_the_field(read: int, write: int, least: int) -> None:
    problem = queue_nums_problem(read, write, least)
    if least <= read <= MAX_QUEUE_NUMS and least <= write <= MAX_QUEUE_NUMS:
        assert problem is None
    else:
        assert problem is not None
        assert ("readQueueNums" if not least <= read <= MAX_QUEUE_NUMS else "writeQueueNums") in problem


@given(st.one_of(st.text(max_size=300), st.text(alphabet="abZ09_-%|", min_size=1, max_size=300)))
def test_group_names_follow_javas_validators(group: str) -> None:
    legal = bool(group.strip()) and len(group) <= GROUP_MAX_LENGTH and all(
        c.isascii() and (c.isalnum() or c in "%|_-") for c in group)
    assert (validate_group(group) is None) is legal


@settings(max_examples=30)
@given(st.lists(st.tuples(COUNTS, COUNTS), min_size=1, max_size=3))
def test_the_sdk_bounds_whatever_a_route_says(counts: list[tuple[int, int]]) -> None:
    route = TopicRouteData(
        queueDatas=[QueueData(brokerName=f"b{i}", perm=6, readQueueNums=r, writeQueueNums=w)
                    for i, (r, w) in enumerate(counts)],
        brokerDatas=[BrokerData(brokerName=f"b{i}", cluster="c", brokerAddrs={0: f"127.0.0.1:{10000 + i}"})
                     for i in range(len(counts))])
    bounded = bounded_route("T", route)
    for qd, (read, write) in zip(bounded.queueDatas, counts, strict=True):
        assert qd.readQueueNums == min(max(read, 0), MAX_QUEUE_NUMS)
        assert qd.writeQueueNums == min(max(write, 0), MAX_QUEUE_NUMS)
    # So a producer's queues are at most MAX_QUEUE_NUMS per broker, whatever the NameServer said.
    info = TopicPublishInfo("T", bounded)
    assert len(info.queues) == sum(qd.writeQueueNums for qd in bounded.queueDatas)
