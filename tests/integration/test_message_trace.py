"""Message trace end to end: a traced producer and push consumer against a broker with
traceTopicEnable, then mqadmin queryMsgTraceById reading what they wrote."""

from __future__ import annotations

import time

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_py.client.trace import RMQ_SYS_TRACE_TOPIC
from rocketmq_py.client.transaction_producer import LocalTransactionState, TransactionProducer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.cli import run_cli, run_cli_async
from tests.integration.daemons import Daemon
from tests.waiting import wait_for_async, wait_until

# The settings of the broker of the shared ``cluster`` fixture (tests/integration/conftest.py).
BROKER_OPTIONS = ("traceTopicEnable=true",)


async def _trace_json(ns: Daemon, msg_id: str, *extra: str) -> list[dict[str, object]]:
    r = await run_cli_async("mqadmin", "queryMsgTraceById", "-i", msg_id, "--json", "-n", ns.addr, *extra)
    return r.json() if r.returncode == 0 else []


async def test_send_and_consume_are_traced(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic, group, cgroup = "TraceTopicA", "PG_TRACE", "CG_TRACE"
    run_cli("mqadmin", "updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", "2", "-w", "2", "-n", ns.addr).ok()
    # The broker made the trace topic itself (traceTopicEnable), one queue as Java's.
    async with Admin(ns.addr) as admin:
        route = await admin.examine_topic_route_info(RMQ_SYS_TRACE_TOPIC)
        assert [(q.readQueueNums, q.writeQueueNums) for q in route.queueDatas] == [(1, 1)]
    consumed: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        consumed.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(cgroup, ns.addr, enable_msg_trace=True,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    before_send = int(time.time() * 1000)
    async with Producer(group, ns.addr, enable_msg_trace=True) as producer:
        await consumer.start()
        try:
            result = await producer.send(Message(topic, b"traced body", tags="TagT", keys="order-1 order-2"))
            assert await wait_until(lambda: any(m.msg_id == result.msg_id for m in consumed), 30)
        finally:
            await consumer.shutdown()  # flushes the consumer's trace records
    after_consume = int(time.time() * 1000)  # the producer's shutdown flushed its Pub record too

    views: list[dict[str, object]] = []

    async def complete() -> bool:
        views[:] = await _trace_json(ns, result.msg_id)
        return {v["msgType"] for v in views} >= {"Pub", "SubBefore", "SubAfter"}

    assert await wait_for_async(complete, 20), views
    by_type = {str(v["msgType"]): v for v in views}
    pub, sub_before, sub_after = by_type["Pub"], by_type["SubBefore"], by_type["SubAfter"]
    assert pub["groupName"] == group and pub["topic"] == topic and pub["status"] == "success"
    assert pub["storeHost"] == broker.addr and pub["offSetMsgId"] == result.offset_msg_id
    assert pub["tags"] == "TagT" and pub["keys"] == "order-1 order-2"
    assert sub_before["groupName"] == cgroup and sub_after["groupName"] == cgroup and sub_after["status"] == "success"
    for v in views:
        assert v["clientHost"] == "127.0.0.1"  # the trace producers' address, as the broker saw it
        assert before_send <= int(str(v["timeStamp"])) <= after_consume
    assert int(str(pub["timeStamp"])) <= int(str(sub_before["timeStamp"])) <= int(str(sub_after["timeStamp"]))

    # Java's tables: the Pub line and the group's Sub line; found by a key as well as by id.
    text = (await run_cli_async("mqadmin", "queryMsgTraceById", "-i", result.msg_id, "-n", ns.addr)).ok().stdout
    lines = text.splitlines()
    assert lines[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert lines[1].split()[:3] == ["Pub", group, "127.0.0.1"] and lines[1].split()[-1] == "success"
    sub = next(ln for ln in lines if ln.startswith("Sub "))
    assert sub.split()[:3] == ["Sub", cgroup, "127.0.0.1"] and sub.split()[-1] == "success"
    async with Admin(ns.addr) as admin:
        by_key = await admin.query_message(RMQ_SYS_TRACE_TOPIC, "order-1")
    assert by_key and all(result.msg_id in m.body.decode() for m in by_key)


async def test_custom_trace_topic_and_failures(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    topic, trace_topic = "TraceTopicB", "MyTraceTopic"
    for t in (topic, trace_topic):
        run_cli("mqadmin", "updateTopic", "-t", t, "-c", "DefaultCluster", "-n", ns.addr).ok()
    async with Producer("PG_CUSTOM", ns.addr, custom_trace_topic=trace_topic) as producer:
        result = await producer.send(Message(topic, b"x"))
    views: list[dict[str, object]] = []

    async def found() -> bool:
        views[:] = await _trace_json(ns, result.msg_id, "-t", trace_topic)
        return bool(views)

    assert await wait_for_async(found, 20)
    assert [v["msgType"] for v in views] == ["Pub"] and views[0]["groupName"] == "PG_CUSTOM"
    # Not in the default topic; a message nobody traced, a topic that does not exist: one line, exit 1.
    assert await _trace_json(ns, result.msg_id) == []
    run_cli("mqadmin", "queryMsgTraceById", "-i", "0A0B0C0D0000", "-n", ns.addr).failed_with_one_line(
        "mqadmin queryMsgTraceById:", "no trace of message 0A0B0C0D0000")
    run_cli("mqadmin", "queryMsgTraceById", "-i", result.msg_id, "-t", "NoSuchTraceTopic", "-n", ns.addr
            ).failed_with_one_line("mqadmin queryMsgTraceById:")


async def test_untraced_clients_write_nothing(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    topic = "TraceTopicC"
    run_cli("mqadmin", "updateTopic", "-t", topic, "-c", "DefaultCluster", "-n", ns.addr).ok()
    async with Producer("PG_PLAIN", ns.addr) as producer:
        assert producer._trace is None
        result = await producer.send(Message(topic, b"x"))
    # A traced producer sent just after is found; the plain one's message never is.
    async with Producer("PG_LATER", ns.addr, enable_msg_trace=True) as later:
        marker = await later.send(Message(topic, b"y"))
    assert await wait_for_async(lambda: _has_trace(ns, marker.msg_id), 20)
    assert await _trace_json(ns, result.msg_id) == []


async def test_lite_pull_consumer_traces_what_it_pulls(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    topic, group = "TraceTopicLite", "CG_TRACE_LITE"
    run_cli("mqadmin", "updateTopic", "-t", topic, "-c", "DefaultCluster", "-n", ns.addr).ok()
    async with Producer("PG_LITE", ns.addr) as producer:
        result = await producer.send(Message(topic, b"lite", keys="lite-1"))
    consumer = LitePullConsumer(group, ns.addr, enable_msg_trace=True,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        polled: list[MessageExt] = []
        for _ in range(20):  # bounded: each poll waits at most 1 s
            polled += await consumer.poll(1.0)
            if any(m.msg_id == result.msg_id for m in polled):
                break
        assert any(m.msg_id == result.msg_id for m in polled)
    finally:
        await consumer.shutdown()
    views: list[dict[str, object]] = []

    async def complete() -> bool:
        views[:] = await _trace_json(ns, result.msg_id)
        return {v["msgType"] for v in views} >= {"SubBefore", "SubAfter"}

    assert await wait_for_async(complete, 20), views
    # As DefaultLitePullConsumerImpl: both records at pull time, the batch counted a success.
    subs = [v for v in views if str(v["msgType"]).startswith("Sub")]
    assert {v["groupName"] for v in subs} == {group} and {v["status"] for v in subs} == {"success"}
    assert not any(v["msgType"] == "Pub" for v in views)  # its producer was not traced


class _Commit:
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_end_transaction_is_traced(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic = "TraceTopicTx"
    run_cli("mqadmin", "updateTopic", "-t", topic, "-c", "DefaultCluster", "-n", ns.addr).ok()
    async with TransactionProducer("PG_TX", ns.addr, transaction_listener=_Commit(), enable_msg_trace=True) as p:
        result = await p.send_message_in_transaction(Message(topic, b"tx", keys="tx-1"))
    views: list[dict[str, object]] = []

    async def complete() -> bool:
        views[:] = await _trace_json(ns, result.msg_id)
        return {v["msgType"] for v in views} >= {"Pub", "EndTransaction"}

    assert await wait_for_async(complete, 20), views
    end = next(v for v in views if v["msgType"] == "EndTransaction")
    assert end["groupName"] == "PG_TX" and end["storeHost"] == broker.addr and end["keys"] == "tx-1"


async def _has_trace(ns: Daemon, msg_id: str) -> bool:
    return bool(await _trace_json(ns, msg_id))
