"""SlaveSynchronize: a slave's copy of its master's tables (docs/ha.md).

The CommitLog comes over the HA port; what is not in it -- topic configs, consumer offsets, delay
offsets, subscription groups -- a slave asks its master for, as Java 4.9.7's slave does: 3 s
after start and every 10 s (GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG). Topic and group tables are replaced whole when the master's
data version differs; consumer offsets are merged in queue by queue, the master's figures
winning. Each table is persisted, so a slave restarted as master starts from them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol, TypeVar

from rocketmq_py.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupWrapper
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfigSerializeWrapper

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

FIRST_DELAY = 3.0
PERIOD = 10.0
TIMEOUT = 3.0

V = TypeVar("V")


class VersionedTable(Protocol[V]):
    """A config table a slave copies whole from its master: topic configs, subscription groups."""

    data_version: DataVersion
    table: dict[str, V]

    async def persist_async(self) -> None: ...


class SlaveSynchronize:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.master_addr: str | None = None
        self.synced_rounds = 0

    async def run(self) -> None:
        await asyncio.sleep(FIRST_DELAY)
        while True:
            try:
                await self.sync_all()
            except Exception:
                log.exception("ScheduledTask SlaveSynchronize syncAll error.")
            await asyncio.sleep(PERIOD)

    async def sync_all(self) -> None:
        addr = self.master_addr
        if addr is None or addr == self.broker.broker_addr:
            return
        for name, code, apply in (("SyncTopicConfig", RequestCode.GET_ALL_TOPIC_CONFIG, self._topic_config),
                                  ("SyncConsumerOffset", RequestCode.GET_ALL_CONSUMER_OFFSET, self._consumer_offset),
                                  ("SyncDelayOffset", RequestCode.GET_ALL_DELAY_OFFSET, self._delay_offset),
                                  ("SyncSubscriptionGroup", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                   self._subscription_group)):
            try:
                response = await self.broker.outer_api.client.invoke(addr, RemotingCommand.request(code), TIMEOUT)
                if response.code != ResponseCode.SUCCESS:
                    raise RemotingError(f"code {response.code}: {response.remark}")
                await apply(response.body or b"")
            except (RemotingError, ValueError, OSError) as exc:
                log.error("%s Exception, %s: %s", name, addr, exc)
        self.synced_rounds += 1

    async def _topic_config(self, body: bytes) -> None:
        wrapper = TopicConfigSerializeWrapper.decode(body)
        await self._replace_table(self.broker.topic_config_manager, wrapper.dataVersion, wrapper.topicConfigTable,
                                  "topic config")

    async def _consumer_offset(self, body: bytes) -> None:
        received = ConsumerOffsetManager("")
        received.decode(body.decode())
        manager = self.broker.consumer_offset_manager
        for key, queues in received.offset_table.items():
            manager.offset_table.setdefault(key, {}).update(queues)
        await manager.persist_async()

    async def _delay_offset(self, body: bytes) -> None:
        if not body:
            return
        service = self.broker.schedule_message_service
        service.decode(body.decode())
        await service.persist_async()

    async def _subscription_group(self, body: bytes) -> None:
        wrapper = SubscriptionGroupWrapper.decode(body)
        await self._replace_table(self.broker.subscription_group_manager, wrapper.dataVersion,
                                  wrapper.subscriptionGroupTable, "Subscription Group")

    async def _replace_table(self, manager: VersionedTable[V], version: DataVersion, table: dict[str, V],
                             what: str) -> None:
        """The master's table in place of the slave's, whole, when its data version differs from
        the slave's copy (Java's syncTopicConfig and syncSubscriptionGroupConfig alike)."""
        if manager.data_version.counter == version.counter and manager.data_version.timestamp == version.timestamp:
            return
        manager.data_version.assign(version)
        manager.table.clear()
        manager.table.update(table)
        await manager.persist_async()
        log.info("Update slave %s from master, %s", what, self.master_addr)
