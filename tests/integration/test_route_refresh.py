"""Route refresh reaches running producers: queues added to a topic are used without a restart
(Java's producers refresh their publish info on every route update)."""

from __future__ import annotations

import time

from rocketmq_py.client import Admin, Message, Producer
from tests.integration.daemons import DaemonSet


async def test_a_producer_uses_queues_added_while_it_runs(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    producer = Producer("pg_refresh", ns.addr, instance_name="refresh-p")
    producer.config.poll_name_server_interval = 0.5
    async with Admin(ns.addr) as admin, producer:
        await admin.create_topic("Grows", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        first = {(await producer.send(Message("Grows", b"x"))).message_queue.queue_id for _ in range(8)}
        assert first == {0, 1}
        await admin.create_topic("Grows", cluster="DefaultCluster", read_queue_nums=6, write_queue_nums=6)
        # Keep sending (each send is the poll) until every queue has been used, for at most 15 s:
        # the route is refreshed every 0.5 s and the broker registers the change at once.
        used: set[int] = set()
        deadline = time.monotonic() + 15
        while len(used) < 6 and time.monotonic() < deadline:
            used.add((await producer.send(Message("Grows", b"y"))).message_queue.queue_id)
        assert used == set(range(6)), f"queues used after the topic grew: {sorted(used)}"
