"""SIGKILL a broker while delayed messages are being sent and delivered: every acknowledged one
still arrives on its real topic after the restart (at-least-once, as RocketMQ promises)."""

from __future__ import annotations

import asyncio
import random

import pytest

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.conftest import running_daemons
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

LEVELS = "1s 1s 2s " + " ".join(["1s"] * 15)
ROUNDS = 3


async def send_until_killed(ns: str, topic: str, broker_kill: asyncio.Future[None], rng: random.Random,
                            acked: set[str]) -> None:
    """Send delayed messages (levels 1-3) until the broker dies; record each acknowledged id."""
    async with Producer("pg_delay_crash", ns, send_msg_timeout=2.0, retry_times_when_send_failed=0) as p:
        for i in range(5000):  # bounded: the kill comes long before
            if broker_kill.done():
                return
            try:
                r = await p.send(Message(topic, f"{i}".encode(), delay_time_level=rng.randint(1, 3)))
            except (MQClientError, RemotingError, OSError):
                return
            acked.add(r.msg_id)


async def test_acknowledged_delayed_messages_survive_sigkill(tmp_path: str) -> None:
    rng = random.Random(9)
    options = (f"messageDelayLevel={LEVELS}", "flushDelayOffsetInterval=200")
    acked: set[str] = set()
    with running_daemons(str(tmp_path)) as ds:  # a killed broker is not asked for a clean exit
        ns = ds.namesrv()
        broker = ds.broker(ns.addr, *options)
        async with Producer("pg_delay_crash", ns.addr) as p:
            await p.send(Message("DelayCrash", b"warm-up"))
        for _ in range(ROUNDS):
            killed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            sender = asyncio.create_task(send_until_killed(ns.addr, "DelayCrash", killed, rng, acked))
            before = len(acked)
            assert await wait_until(lambda b=before, t=sender: len(acked) >= b + 200 or t.done(), 30)  # type: ignore[misc]
            # Some of this round's messages are due and being delivered while others still wait.
            await asyncio.sleep(rng.uniform(0.5, 1.5))  # the random moment of the crash, not a synchronization
            broker.kill()
            killed.set_result(None)
            await asyncio.wait_for(sender, 30)
            broker = ds.broker(ns.addr, *options)  # the same home
        seen: set[str] = set()

        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            seen.update(m.msg_id for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = PushConsumer("cg_delay_crash", ns.addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        c.subscribe("DelayCrash")
        c.register_message_listener(listener)
        async with c:
            assert await wait_until(lambda: acked <= seen, 60), f"{len(acked - seen)} acknowledged never arrived"
