"""LitePullConsumer against real daemons: assign/poll/commit/seek, and rebalancing in a group."""

from __future__ import annotations

import time

from rocketmq_py.client import Message, MessageQueue, Producer
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from tests.integration.daemons import Daemon
from tests.waiting import wait_until


async def produce(ns: str, topic: str, count: int) -> list[MessageQueue]:
    async with Producer("pg_lite", ns) as p:
        queues = await p.fetch_publish_message_queues(topic)
        for i in range(count):
            await p.send(Message(topic, f"{topic}-{i}".encode(), tags="even" if i % 2 == 0 else "odd"),
                         queue=queues[i % len(queues)])
        return queues


async def drain(consumer: LitePullConsumer, want: int, timeout: float = 10.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend(m.body for m in await consumer.poll(0.5))
    return got


async def test_assign_poll_commit_and_seek(cluster: tuple[Daemon, Daemon]) -> None:
    ns = cluster[0].addr
    queues = await produce(ns, "LiteAssign", 20)
    q0 = queues[0]
    async with LitePullConsumer("cg_assign", ns, auto_commit=False,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) as c:
        c.assign([q0])
        await c.rebalance()  # as a NOTIFY_CONSUMER_IDS_CHANGED would: assigned after start, still fixed
        assert c.assignment() == [q0]
        got = await drain(c, 5)
        assert got == [f"LiteAssign-{i}".encode() for i in range(0, 20, 4)], "queue 0 holds every 4th, in order"
        await c.commit()
        assert c.committed_offsets() == {q0: 5}
        await c.seek_to_begin(q0)
        assert (await drain(c, 5))[:1] == [b"LiteAssign-0"]
    await produce(ns, "LiteAssign", 4)  # one more on queue 0 (LiteAssign-0 again, offset 5)
    async with LitePullConsumer("cg_assign", ns, auto_commit=False) as again:
        again.assign([q0])
        assert await drain(again, 1) == [b"LiteAssign-0"], "a restarted consumer resumes at its committed offset"


async def test_tag_subscription_and_group_rebalance(cluster: tuple[Daemon, Daemon]) -> None:
    ns = cluster[0].addr
    await produce(ns, "LiteGroup", 40)
    a = LitePullConsumer("cg_group", ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         instance_name="a", rebalance_interval=60)
    b = LitePullConsumer("cg_group", ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         instance_name="b", rebalance_interval=60)
    a.subscribe("LiteGroup", "even")
    b.subscribe("LiteGroup", "even")
    await a.start()
    await b.start()
    try:
        await wait_until(lambda: len(a.assignment()) + len(b.assignment()) == 4, 10)
        assert len(a.assignment()) == 2 and len(b.assignment()) == 2, (a.assignment(), b.assignment())
        assert not set(a.assignment()) & set(b.assignment())
        await b.shutdown()
        await wait_until(lambda: len(a.assignment()) == 4, 10)
        assert len(a.assignment()) == 4, "the remaining member takes every queue after NOTIFY_CONSUMER_IDS_CHANGED"
        got = await drain(a, 20)
        assert sorted(got) == sorted(f"LiteGroup-{i}".encode() for i in range(0, 40, 2)), "only tag 'even'"
    finally:
        await a.shutdown()
        await b.shutdown()
