"""PushConsumer flow control (issue 6): a slow listener does not let pulled messages pile up past
pullThresholdForQueue per queue, pulling resumes once it catches up, and nothing is lost."""

from __future__ import annotations

import asyncio
import logging

import pytest

from client import Message, Producer
from client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from remoting.protocol.heartbeat import ConsumeFromWhere
from remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until

THRESHOLD = 40
BATCH = 8


async def test_slow_listener_keeps_at_most_threshold_buffered_per_queue(
        daemons: DaemonSet, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="rocketmq.client")
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Producer("pg_flow", ns.addr, instance_name="flow-p") as producer:
        for i in range(400):
            await producer.send(Message("PushFlow", str(i).encode()))
    gate = asyncio.Event()
    seen: list[int] = []

    async def slow(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await gate.wait()
        seen.extend(int(m.body) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_flow", ns.addr, instance_name="flow-c", pull_batch_size=BATCH,
                            pull_threshold_for_queue=THRESHOLD, consume_concurrency=2,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("PushFlow")
    consumer.register_message_listener(slow)
    peak: dict[object, int] = {}

    def cached() -> list[int]:
        for mq, pq in consumer._pqs.items():
            peak[mq] = max(peak.get(mq, 0), pq.msg_count)
        return [pq.msg_count for pq in consumer._pqs.values()]

    async with consumer:
        queues = len(consumer.assignment())
        assert queues >= 2
        # Every queue holds > 400 / queues messages, more than the threshold: each fills up to it.
        assert await wait_until(lambda: len(cached()) == queues and min(cached()) > THRESHOLD, 20)
        assert await wait_until(lambda: consumer.queue_flow_control_times > 10 * queues, 10)
        for _ in range(10):  # held there while the listener is stuck, however long we look
            assert max(cached()) <= THRESHOLD + BATCH
            await asyncio.sleep(0.05)
        gate.set()
        assert await wait_until(lambda: len(seen) >= 400, 30)
    assert sorted(seen) == list(range(400)), "nothing lost or doubled"
    assert max(peak.values()) <= THRESHOLD + BATCH
    assert any("so do flow control" in r.getMessage() and f"threshold {THRESHOLD}" in r.getMessage()
               for r in caplog.records)
