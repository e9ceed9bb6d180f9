"""Shutdown bounds (issue 6): ``shutdown()`` returns within its bound even when the broker is
gone (killed: connections refused) or hung (stopped: requests go unanswered)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rocketmq_py.client import LitePullConsumer, Message, Producer, PushConsumer
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until

BOUND = 2.0


async def _ok(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


@pytest.mark.parametrize("how", ["killed", "hung"])
async def test_shutdown_returns_within_its_bound_when_the_broker_is_gone(daemons: DaemonSet, how: str) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    producer = Producer("pg_down", ns.addr, instance_name=f"down-p-{how}")
    push = PushConsumer("cg_down", ns.addr, instance_name=f"down-c-{how}",
                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    lite = LitePullConsumer("cg_down_lite", ns.addr, instance_name=f"down-l-{how}",
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    for client in (producer, push, lite):
        client.shutdown_timeout = BOUND  # type: ignore[union-attr]
    push.subscribe("ShutdownDown")
    push.register_message_listener(_ok)
    lite.subscribe("ShutdownDown")
    await producer.start()
    await producer.send(Message("ShutdownDown", b"x"))
    await push.start()
    await lite.start()
    try:
        assert await wait_until(lambda: len(push.assignment()) > 0 and len(lite.assignment()) > 0, 20)
        if how == "killed":
            broker.kill()
        else:
            os.kill(broker.proc.pid, signal.SIGSTOP)
        for client in (push, lite, producer):
            started = time.monotonic()
            await client.shutdown()
            took = time.monotonic() - started
            assert took <= BOUND + 0.5, f"{type(client).__name__}.shutdown took {took:.1f} s"
    finally:
        if how == "hung":
            os.kill(broker.proc.pid, signal.SIGCONT)
            broker.kill()
