"""Admin requests (Java's AdminBrokerProcessor, the parts RocketMQ's tools use)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from rocketmq_py.broker.ha_runtime_info import ha_runtime_info
from rocketmq_py.broker.runtime_info import prepare_runtime_info
from rocketmq_py.broker.stats_manager import CallSnapshot, StatsItem
from rocketmq_py.broker.subscription_group_manager import validate_group
from rocketmq_py.broker.topic_config_manager import validate_topic
from rocketmq_py.common.properties import ConfigError, format_properties, parse_properties
from rocketmq_py.remoting.codes import LanguageCode, RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.header import shown
from rocketmq_py.remoting.protocol.admin import (
    BrokerStatsData,
    BrokerStatsItem,
    ViewBrokerStatsDataRequestHeader,
    encode_consume_stats,
)
from rocketmq_py.remoting.protocol.broker import (
    ConnectionBody,
    ConsumerConnection,
    ConsumerGroupRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    ProducerConnection,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    encode_mq_keyed,
)
from rocketmq_py.remoting.protocol.route import KVTable
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupConfig
from rocketmq_py.remoting.protocol.topic import MAX_QUEUE_NUMS, TopicConfig, TopicFilterType, queue_nums_problem

_TOPIC_FILTER_TYPES = frozenset(TopicFilterType.__members__)

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

_LANG_NAMES = {c.value: c.name for c in LanguageCode}


async def _answer_once_written(request: RemotingCommand, written: asyncio.Future[None] | None) -> RemotingCommand:
    """SUCCESS once the topic table with the change is on disk, as Java answers after its
    persist; SYSTEM_ERROR naming the failure when it could not be written (the change stays in
    the table, and the next write retries it)."""
    if written is not None:
        try:
            await written
        except OSError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the topic config was not persisted: {exc}")
    return request.response()


class AdminBrokerProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    # -- topics -----------------------------------------------------------------------------

    async def update_and_create_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(CreateTopicRequestHeader)
        problem = validate_topic(h.topic)
        if problem:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        if self.broker.topic_config_manager.is_system_topic(h.topic):
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The topic[{h.topic}] is conflict with system topic.")
        if h.topicFilterType not in _TOPIC_FILTER_TYPES:  # Java's TopicFilterType.valueOf
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"the custom field <topicFilterType> is not a TopicFilterType: "
                                    f"{shown(h.topicFilterType)} (SINGLE_TAG or MULTI_TAG)")
        problem = queue_nums_problem(h.readQueueNums, h.writeQueueNums)
        if problem:
            return request.response(ResponseCode.SYSTEM_ERROR, f"topic[{h.topic}]: {problem}")
        try:
            config = TopicConfig(topicName=h.topic, readQueueNums=h.readQueueNums, writeQueueNums=h.writeQueueNums,
                                 perm=h.perm, topicFilterType=TopicFilterType(h.topicFilterType),
                                 topicSysFlag=h.topicSysFlag or 0, order=bool(h.order))
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad topic config: {exc}")
        topics = self.broker.topic_config_manager
        topics.update_topic_config(config)
        self.broker.message_store.make_consume_queues_ahead(config.topicName, config.writeQueueNums)
        return await _answer_once_written(request, topics.persist_soon())

    async def delete_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(DeleteTopicRequestHeader)
        broker = self.broker
        broker.topic_config_manager.delete_topic_config(h.topic)
        broker.consumer_offset_manager.remove_topic(h.topic)
        broker.message_store.delete_topics({h.topic})
        return await _answer_once_written(request, broker.topic_config_manager.persist_soon())

    async def get_all_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.broker.topic_config_manager.wrapper().encode())

    async def get_topic_stats_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetTopicStatsInfoRequestHeader)
        config = self.broker.topic_config_manager.select_topic_config(h.topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = self.broker.message_store
        table = {}
        for qid in range(config.writeQueueNums):
            max_offset = store.get_max_offset_in_queue(h.topic, qid)
            last = store.get_message_store_timestamp(h.topic, qid, max_offset - 1) if max_offset > 0 else 0
            table[(h.topic, self.broker.broker_config.brokerName, qid)] = {
                "lastUpdateTimestamp": max(last, 0), "maxOffset": max_offset,
                "minOffset": max(store.get_min_offset_in_queue(h.topic, qid), 0)}
        return request.response(body=encode_mq_keyed("offsetTable", table))

    # -- consumers and producers ------------------------------------------------------------

    async def get_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetConsumeStatsRequestHeader)
        broker = self.broker
        offsets = broker.consumer_offset_manager
        topics = [h.topic] if h.topic else sorted(offsets.which_topic_by_consumer(h.consumerGroup))
        table = {}
        for topic in topics:
            config = broker.topic_config_manager.select_topic_config(topic)
            if config is None or broker.consumer_manager.has_stale_offsets(h.consumerGroup, topic):
                continue
            for qid in range(config.readQueueNums):
                broker_offset = max(broker.message_store.get_max_offset_in_queue(topic, qid), 0)
                consumer_offset = max(broker.consumer_offset_manager.query_offset(h.consumerGroup, topic, qid), 0)
                last = (broker.message_store.get_message_store_timestamp(topic, qid, consumer_offset - 1)
                        if consumer_offset > 0 else 0)
                table[(topic, broker.broker_config.brokerName, qid)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": max(last, 0)}
        tps = sum(broker.stats_manager.tps_group_get_nums(h.consumerGroup, topic) for topic in topics)
        return request.response(body=encode_consume_stats(tps, table).encode())

    async def get_consumer_connection_list(self, conn: RemotingConnection, request: RemotingCommand
                                           ) -> RemotingCommand:
        h = request.decode_header(ConsumerGroupRequestHeader)
        info = self.broker.consumer_manager.get_consumer_group_info(h.consumerGroup)
        if info is None or not info.channel_info_table:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"the consumer group[{h.consumerGroup}] not online")
        body = ConsumerConnection(
            connectionSet=[ConnectionBody(clientAddr=c.client_addr, clientId=c.client_id,
                                          language=_LANG_NAMES.get(c.language, "OTHER"), version=c.version)
                           for c in info.channel_info_table.values()],
            consumeFromWhere=info.consume_from_where, consumeType=info.consume_type, messageModel=info.message_model,
            subscriptionTable=dict(info.subscription_table))
        return request.response(body=body.encode())

    async def get_producer_connection_list(self, conn: RemotingConnection, request: RemotingCommand
                                           ) -> RemotingCommand:
        h = request.decode_header(ProducerGroupRequestHeader)
        channels = self.broker.producer_manager.group_channel_table.get(h.producerGroup)
        if not channels:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist")
        body = ProducerConnection(connectionSet=[
            ConnectionBody(clientAddr=c.client_addr, clientId=c.client_id,
                           language=_LANG_NAMES.get(c.language, "OTHER"), version=c.version)
            for c in channels.values()])
        return request.response(body=body.encode())

    async def update_and_create_subscription_group(self, conn: RemotingConnection, request: RemotingCommand
                                                   ) -> RemotingCommand:
        config = SubscriptionGroupConfig.decode_request(request.body, "subscription group config")
        problem = validate_group(config.groupName)
        if problem is None and not 0 <= config.retryQueueNums <= MAX_QUEUE_NUMS:
            problem = f"retryQueueNums {config.retryQueueNums} is out of range: 0 to {MAX_QUEUE_NUMS}"
        if problem:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {problem}")
        self.broker.subscription_group_manager.update_subscription_group_config(config)
        return request.response()

    async def get_all_subscription_group(self, conn: RemotingConnection, request: RemotingCommand
                                         ) -> RemotingCommand:
        return request.response(body=self.broker.subscription_group_manager.encode().encode())

    async def delete_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(DeleteSubscriptionGroupRequestHeader)
        self.broker.subscription_group_manager.delete_subscription_group_config(h.groupName)
        if h.removeOffset:
            self.broker.consumer_offset_manager.remove_offset(h.groupName)
        return request.response()

    async def get_all_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.broker.consumer_offset_manager.encode().encode())

    async def get_all_delay_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """delayOffset.json's content: how far each delay level has delivered."""
        return request.response(body=self.broker.schedule_message_service.encode().encode())

    async def reset_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Compute each queue's offset for the timestamp, store it, and tell the live consumers."""
        h = request.decode_header(ResetOffsetRequestHeader)
        broker = self.broker
        config = broker.topic_config_manager.select_topic_config(h.topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"[reset-offset] topic[{h.topic}] not exist")
        store = broker.message_store
        table = {}
        for qid in range(config.writeQueueNums):
            target = (store.get_max_offset_in_queue(h.topic, qid) if h.timestamp < 0
                      else store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp))
            committed = broker.consumer_offset_manager.query_offset(h.group, h.topic, qid)
            offset = target if h.isForce or committed < 0 or target < committed else committed
            broker.consumer_offset_manager.commit_offset(h.group, h.topic, qid, offset)
            table[(h.topic, broker.broker_config.brokerName, qid)] = offset
        body = encode_mq_keyed("offsetTable", table)
        info = broker.consumer_manager.get_consumer_group_info(h.group)
        if info is None or not info.channel_info_table:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic}"
                                    f" Timestamp: {h.timestamp}", body=body)
        for channel in info.all_channels():
            try:
                channel.invoke_oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                                              h.to_ext_fields(), body))
            except RemotingError as exc:
                log.warning("[reset-offset] notify %s failed: %s", channel.remote_addr, exc)
        return request.response(body=body)

    # -- runtime and config -----------------------------------------------------------------

    async def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        table = prepare_runtime_info(self.broker)
        table.update(await ha_runtime_info(self.broker))
        return request.response(body=KVTable(table=table).encode())

    async def get_broker_ha_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """RocketMQ 5.x's HARuntimeInfo body (``mqadmin haStatus``): the runtime info's HA keys
        unflattened, with every connected slave's figures."""
        return request.response(body=self.broker.message_store.ha_service.runtime_info().encode())

    async def view_broker_stats_data(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """One stats item's sums and rates over the last minute, hour and day (``mqadmin statsAll``)."""
        h = request.decode_header(ViewBrokerStatsDataRequestHeader)
        item = self.broker.stats_manager.get_stats_item(h.statsName, h.statsKey)
        if item is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The stats <{h.statsName}> <{h.statsKey}> not exist")

        def window(snapshots: deque[CallSnapshot]) -> BrokerStatsItem:
            total, tps, avgpt = StatsItem.compute(snapshots)
            return BrokerStatsItem(avgpt=avgpt, sum=total, tps=tps)

        return request.response(body=BrokerStatsData(statsDay=window(item.day), statsHour=window(item.hour),
                                                     statsMinute=window(item.minute)).encode())

    async def update_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties((request.body or b"").decode())
            self.broker.update_config(props)
        except (UnicodeDecodeError, ConfigError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("updateBrokerConfig called by %s: %s", conn.remote_addr, props)
        return request.response()

    async def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        return request.response(header={"version": b.topic_config_manager.data_version.encode().decode()},
                                body=format_properties(b.broker_config, b.server_config, b.store_config).encode())
