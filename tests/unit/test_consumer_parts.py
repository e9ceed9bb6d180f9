"""The parts both consumers are built of (client/mq_consumer_inner.py), each on its own."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.filter_api import build_subscription
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.process_queue import ProcessQueue
from rocketmq_py.client.pull_api_wrapper import PullAPIWrapper
from rocketmq_py.client.push_consumer import PushConsumer
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.message import MessageExt, encode_record
from rocketmq_py.remoting.protocol.route import MASTER_ID

MQ = MessageQueue("T", "broker-a", 0)


def test_neither_consumer_is_the_other() -> None:
    assert not issubclass(PushConsumer, LitePullConsumer)
    assert not issubclass(LitePullConsumer, PushConsumer)
    assert not hasattr(PushConsumer, "poll"), "a push consumer delivers to its listener"
    consumer = PushConsumer("g")
    consumer.shutdown_timeout = 2.0
    assert consumer._inner.shutdown_timeout == 2.0, "the setting reaches the part that uses it"


@given(offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=40, unique=True).map(sorted),
       order=st.randoms(use_true_random=False))
def test_a_process_queue_commits_up_to_its_lowest_message_in_flight(offsets: list[int], order: Any) -> None:
    pq = ProcessQueue(MQ)
    msgs = [MessageExt(topic="T", body=b"x" * (o % 7), queue_offset=o) for o in offsets]
    pq.put(msgs)
    assert pq.size == sum(len(m.body) for m in msgs)
    done = list(msgs)
    order.shuffle(done)
    left = set(offsets)
    for msg in done:
        left.discard(msg.queue_offset)
        committable = pq.remove(msg)
        assert committable == (min(left) if left else offsets[-1] + 1)
    assert pq.count == 0 and pq.size == 0


def _answer(code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    r = RemotingCommand.request(RequestCode.PULL_MESSAGE, None, body)
    r.code, r.ext_fields = code, ext
    return r


def test_the_suggested_broker_is_kept_per_queue_whatever_the_answer() -> None:
    wrapper = PullAPIWrapper(cast(Any, None), "g")
    sub = build_subscription("T", "*")
    other = MessageQueue("T", "broker-a", 1)
    assert wrapper.process_pull_result(MQ, sub, _answer(ResponseCode.PULL_NOT_FOUND,
                                                        {"suggestWhichBrokerId": "1"}), 0) == []
    assert wrapper.pull_from_which_node_table == {MQ: 1}, "a slave suggested for this queue only"
    wrapper.process_pull_result(other, sub, _answer(ResponseCode.PULL_NOT_FOUND, {}), 0)
    assert wrapper.pull_from_which_node_table.get(other, MASTER_ID) == MASTER_ID
    wrapper.process_pull_result(MQ, sub, _answer(ResponseCode.PULL_NOT_FOUND, {"suggestWhichBrokerId": "0"}), 0)
    assert wrapper.pull_from_which_node_table[MQ] == MASTER_ID, "and the master again once caught up"


def test_a_found_answer_keeps_only_the_subscribed_tags() -> None:
    wrapper = PullAPIWrapper(cast(Any, None), "g")
    body = b"".join(encode_record(MessageExt(topic="T", body=f"m{i}".encode(), queue_offset=i,
                                             properties={"TAGS": tag}))
                    for i, tag in enumerate(["A", "B", "C", "A"]))
    found = _answer(ResponseCode.SUCCESS, {"nextBeginOffset": "4"}, body)
    got = wrapper.process_pull_result(MQ, build_subscription("T", "A || C"), found, 0)
    assert [m.body for m in got] == [b"m0", b"m2", b"m3"]
    assert len(wrapper.process_pull_result(MQ, build_subscription("T", "*"), found, 0)) == 4
