"""Apache RocketMQ's C++ client (librocketmq 1.2.3, PyPI ``rocketmq`` 0.4.4), unchanged, against
our NameServer and Broker: every mode it offers (docs/clients.md lists what it sends).

The client runs in subprocesses (tests/interop/cpp_client.py); what the broker stored and the
offsets it committed are read back with this project's Admin.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting import RemotingClient
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.heartbeat import LockBatchRequestBody, LockBatchResponseBody, MessageQueueBody
from rocketmq_py.remoting.protocol.message import COMPRESSED_FLAG
from rocketmq_py.remoting.protocol.topic import retry_topic
from tests.conftest import Cluster
from tests.interop.bodies import body_of, digest
from tests.interop.broker_calls import QUEUES, admin, create_topic, stored
from tests.interop.conftest import Names
from tests.interop.cpp_process import CppClients

T = TypeVar("T")


def committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    table = admin(cluster, lambda a: a.examine_consume_stats(group, topic))
    return {mq.queue_id: w.consumer_offset for mq, w in table.items()}


def bodies(lines: list[dict[str, Any]]) -> list[str]:
    return [line["body"] for line in lines]


# -- producers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sync", "async", "oneway"])
def test_sends_are_stored_with_their_tags_and_keys(cpp: CppClients, cluster: Cluster, names: Names,
                                                    mode: str) -> None:
    create_topic(cluster, names.topic)
    specs = [{"body": f"{mode}-{i}", "tags": f"Tag{i % 3}", "keys": f"key-{i}"} for i in range(12)]
    sent = cpp.produce(names.topic, names.producer_group, mode, specs)
    assert len(sent) == 12
    if mode != "oneway":
        assert all(s["msg_id"] for s in sent)
    # a oneway send is answered by nothing: poll until all twelve are in
    msgs = _poll(lambda: stored(cluster, names.topic), lambda m: len(m) >= 12, 20)
    assert sorted((m.body.decode(), m.tags, m.keys) for m in msgs) == sorted(
        (s["body"], s["tags"], s["keys"]) for s in specs)
    if mode == "sync":
        by_id = {m.msg_id for m in msgs}
        assert {s["msg_id"] for s in sent} <= by_id


def test_orderly_sends_keep_each_sharding_key_on_one_queue_in_order(cpp: CppClients, cluster: Cluster,
                                                                     names: Names) -> None:
    create_topic(cluster, names.topic, order=True)
    specs = [{"body": f"order{k}-step{s}", "sharding": k} for s in range(5) for k in range(6)]
    cpp.produce(names.topic, names.producer_group, "orderly", specs)
    msgs = stored(cluster, names.topic)
    assert len(msgs) == 30
    for k in range(6):
        mine = [m for m in msgs if m.body.decode().startswith(f"order{k}-")]
        # the wheel's selector: sharding key modulo the queue count
        assert {m.queue_id for m in mine} == {k % QUEUES}
        assert [m.body.decode() for m in sorted(mine, key=lambda m: m.queue_offset)] == [
            f"order{k}-step{s}" for s in range(5)]


def test_batch_is_stored_as_java_stores_it(cpp: CppClients, cluster: Cluster, names: Names) -> None:
    """The 1.2.3 client sends a batch as SEND_MESSAGE with ``batch:"1"`` (C++'s bool to string),
    which Java's Boolean.parseBoolean reads as false: Java's broker stores ONE message whose
    body is the batch encoding. So does ours, and the whole batch stays readable in it."""
    create_topic(cluster, names.topic)
    specs = [{"body": f"batch-{i}", "tags": "B", "keys": f"k{i}"} for i in range(3)]
    (result,) = cpp.produce(names.topic, names.producer_group, "batch", specs)
    assert result["count"] == 3
    (msg,) = stored(cluster, names.topic)
    for i in range(3):
        assert f"batch-{i}".encode() in msg.body
    assert msg.tags is None  # the header's properties are the batch's, not an entry's


# -- push consumers ------------------------------------------------------------------------------

def test_push_consumer_receives_with_a_tag_filter(cpp: CppClients, cluster: Cluster, names: Names) -> None:
    create_topic(cluster, names.topic)
    specs = [{"body": f"m{i}-{tag}", "tags": tag} for i in range(6) for tag in ("A", "B", "C")]
    cpp.produce(names.topic, names.producer_group, "sync", specs)
    consumer = cpp.push(names.topic, names.group, expression="A || B")
    wanted = sorted(s["body"] for s in specs if s["tags"] != "C")
    consumer.wait_for(lambda p: len(p.messages()) >= len(wanted), 40, "the A and B messages")
    consumer.stop()
    got = consumer.messages()
    assert sorted(bodies(got)) == wanted
    assert {m["tags"] for m in got} == {"A", "B"}


def test_broadcasting_consumers_each_receive_every_message(cpp: CppClients, cluster: Cluster,
                                                          names: Names) -> None:
    create_topic(cluster, names.topic)
    first = cpp.push(names.topic, names.group, model="broadcasting", instance="b1", expression="X")
    second = cpp.push(names.topic, names.group, model="broadcasting", instance="b2", expression="X")
    _wait_online(cluster, names.group, 2)
    specs = [{"body": f"bc-{i}", "tags": "X" if i % 4 else "Y"} for i in range(16)]
    cpp.produce(names.topic, names.producer_group, "sync", specs)
    wanted = sorted(s["body"] for s in specs if s["tags"] == "X")
    for consumer in (first, second):
        consumer.wait_for(lambda p: len(p.messages()) >= len(wanted), 40, "every X message")
    for consumer in (first, second):
        consumer.stop()
        assert sorted(bodies(consumer.messages())) == wanted


def test_two_consumers_of_one_group_split_the_queues_without_duplicates(cpp: CppClients, cluster: Cluster,
                                                                        names: Names) -> None:
    create_topic(cluster, names.topic)
    first = cpp.push(names.topic, names.group, instance="c1")
    second = cpp.push(names.topic, names.group, instance="c2")
    assignment = _wait_split(cluster, names.group, names.topic)
    specs = [{"body": f"split-{i}", "sharding": i} for i in range(40)]
    cpp.produce(names.topic, names.producer_group, "orderly", specs)
    _poll(lambda: len(first.messages()) + len(second.messages()), lambda n: n >= 40, 40)
    first.stop()
    second.stop()
    got = first.messages() + second.messages()
    counts = Counter(bodies(got))
    assert sorted(counts) == sorted(str(s["body"]) for s in specs)
    assert max(counts.values()) == 1, [b for b, n in counts.items() if n > 1]
    by_instance = {"c1": first, "c2": second}
    queues_seen = {name: {m["queue_id"] for m in p.messages()} for name, p in by_instance.items()}
    assert all(queues_seen.values())
    assert queues_seen["c1"].isdisjoint(queues_seen["c2"])
    for name, queues in queues_seen.items():
        assert queues <= assignment[name]


def test_orderly_consumer_holds_broker_locks_and_keeps_queue_order(cpp: CppClients, cluster: Cluster,
                                                                   names: Names) -> None:
    create_topic(cluster, names.topic, order=True)
    consumer = cpp.push(names.topic, names.group, orderly=True, threads=4)
    specs = [{"body": f"o{k}-{s}", "sharding": k} for s in range(6) for k in range(QUEUES)]
    cpp.produce(names.topic, names.producer_group, "orderly", specs)
    consumer.wait_for(lambda p: len(p.messages()) >= len(specs), 40, "every orderly message")
    # While it runs, the broker holds its queue locks: another client of the group gets none.
    refused = _try_lock(cluster, names.group, names.topic, "intruder@elsewhere")
    consumer.stop()
    assert refused == set()
    got = consumer.messages()
    assert sorted(bodies(got)) == sorted(str(s["body"]) for s in specs)
    for k in range(QUEUES):
        steps = [m["body"] for m in got if m["body"].startswith(f"o{k}-")]
        assert steps == [f"o{k}-{s}" for s in range(6)]
    # Its shutdown released them (UNLOCK_BATCH_MQ), all but one: 1.2.3's unlockAll leaves the
    # first queue of each broker out of the request (docs/clients.md), so queue 0 stays locked
    # until the lock expires (rebalanceLockMaxLiveTime), on Java's broker as on ours.
    assert _try_lock(cluster, names.group, names.topic, "intruder@elsewhere") == set(range(1, QUEUES))


def test_reconsume_later_comes_back_through_the_retry_topic(cpp: CppClients, cluster: Cluster,
                                                            names: Names) -> None:
    create_topic(cluster, names.topic)
    consumer = cpp.push(names.topic, names.group, reconsume_later=["again-1", "again-2"])
    specs = [{"body": b} for b in ("fine-1", "again-1", "again-2", "fine-2")]
    cpp.produce(names.topic, names.producer_group, "sync", specs)
    # The retry queue is the client's after its first periodic rebalance (every 10 s in 1.2.3):
    # the group's retry topic has no route yet when the consumer starts.
    consumer.wait_for(lambda p: len(p.messages()) >= 6, 40, "two redeliveries")
    consumer.stop()
    got = consumer.messages()
    assert Counter(bodies(got)) == {"fine-1": 1, "fine-2": 1, "again-1": 2, "again-2": 2}
    for body in ("again-1", "again-2"):
        deliveries = [m for m in got if m["body"] == body]
        assert [m["reconsume_times"] for m in deliveries] == [0, 1]
        assert deliveries[1]["topic"] == names.topic  # the client restores the real topic
    # The broker stored the two sent back in the group's retry topic (after their delay).
    retried = stored(cluster, retry_topic(names.group), queues=1)
    assert sorted(m.body.decode() for m in retried) == ["again-1", "again-2"]


def test_delay_level_holds_a_message_back(cpp: CppClients, cluster: Cluster, names: Names) -> None:
    create_topic(cluster, names.topic)
    consumer = cpp.push(names.topic, names.group)
    cpp.produce(names.topic, names.producer_group, "sync",
                [{"body": "later", "delay_level": 2}, {"body": "now"}])
    consumer.wait_for(lambda p: len(p.messages()) >= 2, 40, "both messages")
    consumer.stop()
    got = {m["body"]: m for m in consumer.messages()}
    # level 2 is 2 s in this cluster (tests/interop/conftest.py)
    assert got["later"]["stored"] - got["later"]["born"] >= 1900
    assert got["now"]["stored"] - got["now"]["born"] < 1900


def test_pull_from_offset_zero_to_no_new_msg(cpp: CppClients, cluster: Cluster, names: Names) -> None:
    create_topic(cluster, names.topic)
    specs = [{"body": f"pull-{i}", "tags": "P"} for i in range(20)]
    cpp.produce(names.topic, names.producer_group, "sync", specs)
    lines = cpp.start("pull", topic=names.topic, group=names.group, expression="P").finish()
    got = [line for line in lines if line["kind"] == "msg"]
    assert sorted(bodies(got)) == sorted(s["body"] for s in specs)
    queues = [line for line in lines if line["kind"] == "queue"]
    assert len(queues) == QUEUES
    assert all(q["status"] == "NO_NEW_MSG" for q in queues)
    per_queue = Counter(m["queue_id"] for m in got)
    assert {q["queue_id"]: q["next_offset"] for q in queues} == {q: per_queue.get(q, 0) for q in range(QUEUES)}


@pytest.mark.parametrize("size", [8 * 1024, 100 * 1024])
def test_large_bodies_are_compressed_and_arrive_whole(cpp: CppClients, cluster: Cluster, names: Names,
                                                      size: int) -> None:
    create_topic(cluster, names.topic)
    specs = [{"size": size, "seed": seed, "tags": "L"} for seed in range(3)]
    expected = {digest(body_of(s)) for s in specs}
    cpp.produce(names.topic, names.producer_group, "sync", specs)
    msgs = stored(cluster, names.topic)
    assert len(msgs) == 3
    # the client compresses bodies over 4 KiB; the broker keeps them compressed
    assert all(m.sys_flag & COMPRESSED_FLAG for m in msgs)
    assert {digest(m.body) for m in msgs} == expected
    consumer = cpp.push(names.topic, names.group)
    consumer.wait_for(lambda p: len(p.messages()) >= 3, 40, "the large messages")
    consumer.stop()
    assert {m["digest"] for m in consumer.messages()} == expected
    assert {m["size"] for m in consumer.messages()} == {size}


def test_restarted_consumer_resumes_at_its_committed_offset(cpp: CppClients, cluster: Cluster,
                                                           names: Names) -> None:
    create_topic(cluster, names.topic)
    cpp.produce(names.topic, names.producer_group, "sync", [{"body": f"first-{i}"} for i in range(8)])
    consumer = cpp.push(names.topic, names.group)
    consumer.wait_for(lambda p: len(p.messages()) >= 8, 40, "the first eight")
    consumer.stop()  # shutdown persists the offsets to the broker
    offsets = committed(cluster, names.group, names.topic)
    assert sum(offsets.values()) == 8
    cpp.produce(names.topic, names.producer_group, "sync", [{"body": f"second-{i}"} for i in range(8)])
    again = cpp.push(names.topic, names.group)
    again.wait_for(lambda p: len(p.messages()) >= 8, 40, "the second eight")
    again.stop()
    assert sorted(bodies(again.messages())) == sorted(f"second-{i}" for i in range(8))
    assert sum(committed(cluster, names.group, names.topic).values()) == 16


# -- helpers -------------------------------------------------------------------------------------

def _poll(read: Callable[[], T], done: Callable[[T], bool], timeout: float) -> T:
    deadline = time.monotonic() + timeout
    value = read()
    while not done(value):
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value: {value!r}")
        time.sleep(0.2)
        value = read()
    return value


def _online(cluster: Cluster, group: str) -> list[str]:
    async def ids(a: Admin) -> list[str]:
        try:
            info = await a.examine_consumer_connection_info(group)
        except MQClientError:  # not online (yet)
            return []
        return [c["clientId"] for c in info.get("connectionSet", [])]

    return admin(cluster, ids)


def _wait_online(cluster: Cluster, group: str, count: int) -> list[str]:
    return _poll(lambda: _online(cluster, group), lambda ids: len(ids) >= count, 30)


def _wait_split(cluster: Cluster, group: str, topic: str) -> dict[str, set[int]]:
    """Each instance's queues of ``topic`` once the two have split them (asked of the clients
    themselves through GET_CONSUMER_RUNNING_INFO), keyed by instance name."""
    ids = _wait_online(cluster, group, 2)

    def assignment() -> dict[str, set[int]]:
        async def ask(a: Admin) -> dict[str, set[int]]:
            out: dict[str, set[int]] = {}
            for client_id in ids:
                info = await a.get_consumer_running_info(group, client_id)
                out[client_id.rsplit("@", 1)[1]] = {mq.queue_id for mq in info.mq_table if mq.topic == topic}
            return out

        return admin(cluster, ask)

    def split(table: dict[str, set[int]]) -> bool:
        parts = list(table.values())
        return (len(parts) == 2 and all(parts) and parts[0].isdisjoint(parts[1])
                and parts[0] | parts[1] == set(range(QUEUES)))

    return _poll(assignment, split, 40)


def _try_lock(cluster: Cluster, group: str, topic: str, client_id: str) -> set[int]:
    """The queues LOCK_BATCH_MQ grants ``client_id`` now (each released again at once)."""
    queues = [MessageQueueBody(topic=topic, brokerName="broker-a", queueId=q) for q in range(QUEUES)]
    body = LockBatchRequestBody(clientId=client_id, consumerGroup=group, mqSet=queues).encode()

    async def lock() -> set[int]:
        client = RemotingClient()
        try:
            r = await client.invoke(cluster.broker.addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body),
                                    5.0)
            assert r.code == ResponseCode.SUCCESS, r.remark
            granted = {mq.queueId for mq in LockBatchResponseBody.decode(r.body).lockOKMQSet}
            if granted:
                await client.invoke(cluster.broker.addr,
                                    RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body), 5.0)
            return granted
        finally:
            await client.close()

    return asyncio.run(lock())
