"""An operator's reset by time reaches running consumers (RESET_CONSUMER_CLIENT_OFFSET): they
drop what they pulled and consume again from the reset offsets; and a lite consumer's seek
backwards never hands out a batch pulled before it."""

from __future__ import annotations

from collections import Counter

from rocketmq_py.client import Admin, ConsumeConcurrentlyStatus, Message, MessageQueue, Producer, PushConsumer
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until


async def test_a_reset_by_time_makes_a_running_push_consumer_consume_again(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Producer("pg_reset", ns.addr, instance_name="reset-p") as producer:
        for i in range(10):
            await producer.send(Message("ResetTopic", f"r{i}".encode()))
    seen: Counter[bytes] = Counter()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_reset", ns.addr, instance_name="reset-c",
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("ResetTopic")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        assert await wait_until(lambda: len(seen) == 10, 20)
        assert max(seen.values()) == 1
        async with Admin(ns.addr) as admin:
            offsets = await admin.reset_offset_by_timestamp("ResetTopic", "cg_reset", 0)
        assert offsets and all(off == 0 for off in offsets.values())
        assert await wait_until(lambda: all(n == 2 for n in seen.values()) and len(seen) == 10, 20), \
            f"every message consumed again after the reset: {dict(seen)}"
    finally:
        await consumer.shutdown()


async def test_a_seek_backwards_drops_batches_pulled_before_it(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Producer("pg_seek", ns.addr, instance_name="seek-p") as producer:
        first_sent = await producer.send(Message("SeekBack", b"auto-create"))
        mq = MessageQueue("SeekBack", first_sent.message_queue.broker_name, 0)
        for i in range(40):
            await producer.send(Message("SeekBack", f"b{i}".encode()), queue=mq)
    consumer = LitePullConsumer("cg_seek", ns.addr, instance_name="seek-c", pull_batch_size=10, auto_commit=False)
    consumer.assign([mq])
    async with consumer:
        first = await consumer.poll(10)
        assert first and first[0].queue_offset == 0
        # White-box: wait until later batches sit in the buffer, then seek back.
        assert await wait_until(lambda: consumer._buffer.qsize() >= 2, 10)
        await consumer.seek(mq, 5)
        after = await consumer.poll(10)
        assert after and after[0].queue_offset == 5, [m.queue_offset for m in after]
