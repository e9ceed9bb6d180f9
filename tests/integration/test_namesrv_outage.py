"""NameServer outages seen from running clients (issue 6): with one of two NameServers killed,
producers and consumers carry on (and new routes come from the other); with every NameServer
killed, they keep working on the routes they cached."""

from __future__ import annotations

import logging

import pytest

from rocketmq_py.client import ConsumeConcurrentlyStatus, LitePullConsumer, Message, Producer, PushConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until


def _fast(client: Producer | LitePullConsumer | PushConsumer) -> None:
    # Route polls every second instead of 30, so the clients really do ask a dead NameServer.
    client.config.poll_name_server_interval = 1.0
    client.config.heartbeat_broker_interval = 1.0


def _recorder(seen: list[bytes]):  # type: ignore[no-untyped-def]
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    return listener


async def _lite(group: str, addrs: str, topic: str) -> LitePullConsumer:
    lite = LitePullConsumer(group, addrs, instance_name=f"{group}-l", rebalance_interval=1.0,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    _fast(lite)
    lite.subscribe(topic)
    await lite.start()
    return lite


async def _polled(lite: LitePullConsumer, seen: list[bytes], want: list[bytes], timeout: float = 20.0) -> bool:
    """Poll until every wanted body has come, or the deadline passes."""
    async def done() -> bool:
        seen.extend(m.body for m in await lite.poll(0.2))
        return sorted(seen) == sorted(want)
    for _ in range(int(timeout / 0.2)):
        if await done():
            return True
    return False


async def _send(producer: Producer, topic: str, prefix: str, n: int) -> list[bytes]:
    bodies = [f"{prefix}-{i}".encode() for i in range(n)]
    for body in bodies:
        await producer.send(Message(topic, body))
    return bodies


async def test_one_namesrv_killed_clients_carry_on_with_the_other(daemons: DaemonSet) -> None:
    ns1, ns2 = daemons.namesrv(name="ns1"), daemons.namesrv(name="ns2")
    addrs = f"{ns1.addr};{ns2.addr}"
    daemons.broker(addrs)
    seen: list[bytes] = []
    producer = Producer("pg_outage1", addrs, instance_name="outage1-p")
    consumer = PushConsumer("cg_outage1", addrs, instance_name="outage1-c",
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    _fast(producer)
    _fast(consumer)
    consumer.subscribe("Outage1")
    consumer.register_message_listener(_recorder(seen))
    await producer.start()
    try:
        sent = await _send(producer, "Outage1", "before", 5)
        await consumer.start()
        lite = await _lite("cg_outage1_lite", addrs, "Outage1")
        lite_seen: list[bytes] = []
        try:
            assert await wait_until(lambda: sorted(seen) == sorted(sent), 20)
            assert await _polled(lite, lite_seen, sent)
            ns1.kill()
            sent += await _send(producer, "Outage1", "after", 5)
            assert await wait_until(lambda: sorted(seen) == sorted(sent), 20), "consumption carried on"
            assert await _polled(lite, lite_seen, sent), "lite pull carried on"
            # A topic nobody routed before: its route can only come from the live NameServer.
            fresh = await _send(producer, "Outage1New", "new", 2)
            assert len(fresh) == 2
        finally:
            await lite.shutdown()
            await consumer.shutdown()
    finally:
        await producer.shutdown()


async def test_every_namesrv_killed_clients_keep_their_cached_routes(daemons: DaemonSet,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="rocketmq.client")
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    seen: list[bytes] = []
    producer = Producer("pg_outage2", ns.addr, instance_name="outage2-p")
    consumer = PushConsumer("cg_outage2", ns.addr, instance_name="outage2-c",
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    _fast(producer)
    _fast(consumer)
    consumer.subscribe("Outage2")
    consumer.register_message_listener(_recorder(seen))
    await producer.start()
    try:
        sent = await _send(producer, "Outage2", "before", 5)
        await consumer.start()
        lite = await _lite("cg_outage2_lite", ns.addr, "Outage2")
        lite_seen: list[bytes] = []
        try:
            assert await wait_until(lambda: sorted(seen) == sorted(sent), 20)
            assert await _polled(lite, lite_seen, sent)
            ns.kill()

            def failed_polls() -> int:
                return sum("updateTopicRouteInfoFromNameServer Outage2 failed" in r.getMessage()
                           for r in caplog.records)

            # Every client has asked the dead NameServer (and failed) before we go on.
            assert await wait_until(lambda: failed_polls() >= 6, 20)
            sent += await _send(producer, "Outage2", "cached", 5)
            assert await wait_until(lambda: sorted(seen) == sorted(sent), 20), "consumption on cached routes"
            assert await _polled(lite, lite_seen, sent), "lite pull on cached routes"
        finally:
            await lite.shutdown()
            await consumer.shutdown()
    finally:
        await producer.shutdown()
