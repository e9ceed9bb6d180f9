"""PushConsumer flow control (DefaultMQPushConsumer's pullThresholdForQueue and max span): a
slow listener keeps a bounded number of messages cached per queue, and nothing is lost or
doubled once it speeds up."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from rocketmq_py.client import Admin, ConsumeConcurrentlyStatus, Message, MQClientError, Producer, PushConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until

THRESHOLD = 50
BATCH = 32


async def _one_queue_topic(admin: Admin, topic: str) -> None:
    """Create ``topic`` with one queue and wait until the NameServer routes it (the broker
    registers the change at once, but not before create_topic returns)."""
    await admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=1, write_queue_nums=1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # each round trip to the NameServer is the poll
        try:
            route = await admin.examine_topic_route_info(topic)
        except MQClientError:
            continue
        if route.queueDatas and route.queueDatas[0].writeQueueNums == 1:
            return
    raise AssertionError(f"{topic} never appeared in the NameServer's routes")


async def test_a_slow_listener_holds_pulling_back(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin, Producer("pg_flow", ns.addr, instance_name="flow-p") as producer:
        await _one_queue_topic(admin, "Flow")
        for start in range(0, 400, 40):
            await producer.send_batch([Message("Flow", f"m{i}".encode()) for i in range(start, start + 40)])
    release = asyncio.Event()
    started: Counter[bytes] = Counter()
    done: Counter[bytes] = Counter()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            started[m.body] += 1
        await release.wait()
        for m in msgs:
            done[m.body] += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_flow", ns.addr, instance_name="flow-c", consume_concurrency=1000,
                            pull_batch_size=BATCH, pull_threshold_for_queue=THRESHOLD,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("Flow")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        # Pulling stops once the queue caches more than the threshold, and stays stopped.
        assert await wait_until(lambda: consumer.queue_flow_control_times >= 5, 20)
        assert THRESHOLD < sum(started.values()) <= THRESHOLD + BATCH
        release.set()
        assert await wait_until(lambda: len(done) == 400, 30)
        assert max(done.values()) == 1 and max(started.values()) == 1, "nothing consumed twice"
    finally:
        release.set()
        await consumer.shutdown()


async def test_max_span_holds_pulling_back_behind_a_stuck_message(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin, Producer("pg_span", ns.addr, instance_name="span-p") as producer:
        await _one_queue_topic(admin, "Span")
        for start in range(0, 300, 50):
            await producer.send_batch([Message("Span", f"s{i}".encode()) for i in range(start, start + 50)])
    release = asyncio.Event()
    done: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        if any(m.body == b"s0" for m in msgs):
            await release.wait()  # the oldest message is stuck; the rest are consumed at once
        done.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_span", ns.addr, instance_name="span-c", pull_batch_size=BATCH,
                            consume_concurrently_max_span=100,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("Span")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        assert await wait_until(lambda: consumer.queue_max_span_flow_control_times >= 5, 20)
        assert len(done) <= 100 + BATCH, "no pulls beyond the span while offset 0 is pending"
        release.set()
        assert await wait_until(lambda: len(done) == 300, 30)
    finally:
        release.set()
        await consumer.shutdown()
