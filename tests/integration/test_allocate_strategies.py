"""Allocation strategies wired into consumers (issue 6): by config takes exactly the configured
queues, by machine room only the queues of brokers named ``<room>@<name>`` in the consumer's
rooms, and a strategy can be named."""

from __future__ import annotations

import pytest

from rocketmq_py.client import Admin, LitePullConsumer, PushConsumer
from rocketmq_py.client.allocate import (
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    MessageQueue,
)
from rocketmq_py.client.errors import NoRouteError
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_for_async, wait_until


async def _ok(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_by_config_and_by_machine_room(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr, name="roomA@broker-a")
    daemons.broker(ns.addr, name="roomB@broker-b")
    async with Admin(ns.addr) as admin:
        targets = await admin.create_topic("Rooms", read_queue_nums=4, write_queue_nums=4)
        assert len(targets) == 2

        async def both_registered() -> bool:
            # Until the first broker's registration lands the NameServer has no route at all.
            try:
                return len((await admin.examine_topic_route_info("Rooms")).queueDatas) == 2
            except NoRouteError:
                return False

        assert await wait_for_async(both_registered, 5, 0.05)

    chosen = [MessageQueue("Rooms", "roomB@broker-b", 1), MessageQueue("Rooms", "roomA@broker-a", 3)]
    by_config = LitePullConsumer("cg_rooms_cfg", ns.addr, instance_name="rooms-cfg",
                                 allocate_strategy=AllocateMessageQueueByConfig(chosen))
    by_config.subscribe("Rooms")
    rooms = [PushConsumer("cg_rooms", ns.addr, instance_name=f"rooms-{i}", rebalance_interval=0.5,
                          allocate_strategy=AllocateMessageQueueByMachineRoom({"roomA"})) for i in range(2)]
    for c in rooms:
        c.subscribe("Rooms")
        c.register_message_listener(_ok)
    async with by_config:
        assert by_config.assignment() == sorted(chosen)
        async with rooms[0], rooms[1]:
            room_a = {MessageQueue("Rooms", "roomA@broker-a", q) for q in range(4)}

            def split() -> bool:
                # The group's %RETRY% queues are allocated too; this checks the topic's.
                a, b = ({q for q in c.assignment() if q.topic == "Rooms"} for c in rooms)
                return a | b == room_a and not a & b and len(a) == len(b) == 2

            assert await wait_until(split, 10), [c.assignment() for c in rooms]


def test_strategy_by_name() -> None:
    c = LitePullConsumer("cg_named", "127.0.0.1:1", allocate_strategy="AVG_BY_CIRCLE")
    assert isinstance(c.strategy, AllocateMessageQueueAveragelyByCircle)
    with pytest.raises(ValueError, match="AllocateMessageQueueByMachineRoom"):
        LitePullConsumer("cg_named", "127.0.0.1:1", allocate_strategy="MACHINE_ROOM")
    with pytest.raises(ValueError, match="unknown allocate strategy"):
        LitePullConsumer("cg_named", "127.0.0.1:1", allocate_strategy="NOPE")
