"""Admin calls the interop tests make of the module's cluster (synchronously, as the foreign
clients' tests are plain functions), signed with an account where the broker has ACL on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.conftest import Cluster
from tests.waiting import wait_for_async

QUEUES = 4
T = TypeVar("T")


def admin(cluster: Cluster, call: Callable[[Admin], Awaitable[T]], credentials: SessionCredentials | None = None
          ) -> T:
    async def run() -> T:
        async with Admin(cluster.namesrv_addr, session_credentials=credentials) as a:
            return await call(a)

    return asyncio.run(run())


def create_topic(cluster: Cluster, topic: str, order: bool = False, credentials: SessionCredentials | None = None
                 ) -> None:
    """Create ``topic`` and wait (bounded) until the NameServer routes it, so a client's first
    send finds the route and a send's failure is the broker's answer."""
    async def create(a: Admin) -> None:
        await a.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES, order=order)

        async def routed() -> bool:
            try:
                return bool((await a.examine_topic_route_info(topic)).queueDatas)
            except MQClientError:
                return False

        assert await wait_for_async(routed, 20), f"{topic} not routed"

    admin(cluster, create, credentials)


def stored(cluster: Cluster, topic: str, queues: int = QUEUES, credentials: SessionCredentials | None = None
           ) -> list[MessageExt]:
    """Every message the broker holds in ``topic``, queue by queue, as a pull returns it."""
    async def read(a: Admin) -> list[MessageExt]:
        out: list[MessageExt] = []
        for qid in range(queues):
            offset = 0
            for _ in range(100):
                msgs, offset = await a.pull_messages(topic, "broker-a", qid, offset)
                if not msgs:
                    break
                out.extend(msgs)
        return out

    return admin(cluster, read, credentials)
