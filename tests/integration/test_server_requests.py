"""Requests the broker sends to clients (issue 6), end to end through the Admin API: a reset of
offsets by time makes a running consumer re-consume from there, and a consumer's running info
comes back through the broker with RocketMQ's field names."""

from __future__ import annotations

import time

from rocketmq_py.client import Admin, Message, Producer
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_py.client.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_THREADPOOL_CORE_SIZE,
)
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until


async def test_reset_by_time_and_running_info(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Producer("pg_reset", ns.addr, instance_name="reset-p") as producer:
        for i in range(10):
            await producer.send(Message("ResetTopic", f"old-{i}".encode()))
        # A clear gap, so the queue offset "by time" is unambiguous (4.9's store answers the
        # message closest to the time, on either side).
        last_old = int(time.time() * 1000)
        assert await wait_until(lambda: int(time.time() * 1000) > last_old + 500, 2)
        middle = int(time.time() * 1000)
        for i in range(10):
            await producer.send(Message("ResetTopic", f"new-{i}".encode()))
    seen: list[str] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_reset", ns.addr, instance_name="reset-c", consume_concurrency=3,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("ResetTopic")
    consumer.register_message_listener(listener)
    async with consumer, Admin(ns.addr) as admin:
        assert await wait_until(lambda: len(seen) == 20, 20)
        offsets = await admin.reset_offset_by_timestamp("ResetTopic", "cg_reset", middle)
        assert sum(offsets.values()) == 10, offsets  # the ten "old" messages are before ``middle``
        assert await wait_until(lambda: len(seen) == 30, 20), seen
        assert sorted(seen[20:]) == sorted(f"new-{i}" for i in range(10)), "re-consumed from the reset time"

        info = await admin.get_consumer_running_info("cg_reset", consumer._require_started().client_id)
        props = info.properties
        assert props[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
        assert props[PROP_THREADPOOL_CORE_SIZE] == "3"
        assert props[PROP_CLIENT_VERSION].startswith("V")
        assert abs(int(props[PROP_CONSUMER_START_TIMESTAMP]) - consumer.start_timestamp) == 0
        # A clustering push consumer also subscribes to its group's retry topic (Java's copySubscription).
        assert sorted(s["topic"] for s in info.subscription_set) == ["%RETRY%cg_reset", "ResetTopic"]
        assert set(info.mq_table) == set(consumer.assignment())
        committed = {mq: v["commitOffset"] for mq, v in info.mq_table.items()}
        assert sum(committed.values()) == 20
        assert all(v["cachedMsgCount"] == 0 for v in info.mq_table.values())
        assert "ResetTopic" in info.status_table
        # A client the broker does not know: the broker says so.
        try:
            await admin.get_consumer_running_info("cg_reset", "10.0.0.1@nobody")
        except Exception as exc:
            assert "not online" in str(exc)
        else:
            raise AssertionError("an unknown client must be refused")
    assert isinstance(next(iter(offsets)), MessageQueue)
