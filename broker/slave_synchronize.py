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
from typing import TYPE_CHECKING

from rocketmq_py.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupWrapper
from rocketmq_py.remoting.protocol.topic import TopicConfigSerializeWrapper

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

FIRST_DELAY = 3.0
PERIOD = 10.0
TIMEOUT = 3.0


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
        manager = self.broker.topic_config_manager
        if manager.data_version.counter == wrapper.dataVersion.counter and \
                manager.data_version.timestamp == wrapper.dataVersion.timestamp:
            return
        manager.data_version.assign(wrapper.dataVersion)
        manager.table.clear()
        manager.table.update(wrapper.topicConfigTable)
        await manager.persist_async()
        log.info("Update slave topic config from master, %s", self.master_addr)

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
        manager = self.broker.subscription_group_manager
        if manager.data_version.counter == wrapper.dataVersion.counter and \
                manager.data_version.timestamp == wrapper.dataVersion.timestamp:
            return
        manager.data_version.assign(wrapper.dataVersion)
        manager.table.clear()
        manager.table.update(wrapper.subscriptionGroupTable)
        await manager.persist_async()
        log.info("Update slave Subscription Group from master, %s", self.master_addr)
