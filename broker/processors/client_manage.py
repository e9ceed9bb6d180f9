"""HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG (Java's ClientManageProcessor)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketmq_py.broker.client_channel import ClientChannelInfo
from rocketmq_py.broker.filter import FilterError
from rocketmq_py.broker.filter.expression_filter import compile_cached
from rocketmq_py.broker.subscription_group_manager import validate_group
from rocketmq_py.remoting.codes import SERIALIZE_TYPES_FIELD, ResponseCode, SerializeType
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.heartbeat import (
    CheckClientRequestBody,
    ExpressionType,
    HeartbeatData,
    SubscriptionData,
    UnregisterClientRequestHeader,
)
from rocketmq_py.remoting.protocol.topic import PermName, retry_topic

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

# TopicSysFlag.buildSysFlag(unit=false, hasUnitSub=true): unit-mode consumers' retry topics.
_UNIT_SUB_FLAG = 0x2


# Every header serialization this broker reads: our SDK then writes msgpack headers, which cost
# it and the broker about half of what JSON does.
_OFFER = {SERIALIZE_TYPES_FIELD: ",".join(t.name for t in SerializeType)}


class ClientManageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def heart_beat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        data = HeartbeatData.decode_request(request.body, "heartbeat body")
        for group in [c.groupName for c in data.consumerDataSet] + [p.groupName for p in data.producerDataSet]:
            problem = validate_group(group)
            if problem:  # refused whole, before any group is registered
                return request.response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {problem}")
        broker = self.broker
        info = ClientChannelInfo(conn, data.clientID, request.language, request.version)
        for consumer in data.consumerDataSet:
            group_config = broker.subscription_group_manager.find_subscription_group_config(consumer.groupName)
            notify = broker.broker_config.notifyConsumerIdsChangedEnable
            if group_config is not None:
                notify = notify and group_config.notifyConsumerIdsChangedEnable
                # Every clustering consumer also consumes its group's retry topic, so it must
                # exist (and be routable) before the first message is sent back.
                broker.topic_config_manager.create_topic_in_send_message_back_method(
                    retry_topic(consumer.groupName), group_config.retryQueueNums,
                    PermName.PERM_READ | PermName.PERM_WRITE, _UNIT_SUB_FLAG if consumer.unitMode else 0)
            _log_bad_selectors(consumer.groupName, consumer.subscriptionDataSet)
            changed = broker.consumer_manager.register_consumer(
                consumer.groupName, info, consumer.consumeType, consumer.messageModel, consumer.consumeFromWhere,
                consumer.subscriptionDataSet, notify)
            if changed:
                log.info("registerConsumer info changed %s %s", consumer.groupName, conn.remote_addr)
        for producer in data.producerDataSet:
            broker.producer_manager.register_producer(producer.groupName, info)
        return request.response(header=dict(_OFFER))

    async def unregister_client(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request.decode_header(UnregisterClientRequestHeader)
        broker = self.broker
        if header.producerGroup:
            broker.producer_manager.unregister_producer(header.producerGroup, conn)
        if header.consumerGroup:
            group_config = broker.subscription_group_manager.table.get(header.consumerGroup)
            notify = broker.broker_config.notifyConsumerIdsChangedEnable and (
                group_config is None or group_config.notifyConsumerIdsChangedEnable)
            broker.consumer_manager.unregister_consumer(header.consumerGroup, conn, notify)
        return request.response()

    async def check_client_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = CheckClientRequestBody.decode_request(request.body, "check-client body")
        sub = body.subscriptionData
        if sub is None or sub.expressionType == ExpressionType.TAG:
            return request.response()
        if not self.broker.broker_config.enablePropertyFilter:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The broker does not support consumer to filter message by {sub.expressionType}")
        if sub.expressionType != ExpressionType.SQL92:
            # Java's FilterFactory has no such filter and the check fails on it.
            return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    f"unknown expression type {sub.expressionType}")
        try:
            compile_cached(sub.subString)
        except FilterError as exc:
            log.warning("checkClientConfig: bad %s subscription of group %s on %s: %s", sub.expressionType,
                        body.group, sub.topic, exc)
            return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return request.response()


def _log_bad_selectors(group: str, subscriptions: list[SubscriptionData]) -> None:
    """Java registers a heartbeat whatever its selectors and logs the ones that do not compile
    (their pulls then get FILTER_DATA_NOT_EXIST); compiling here also warms the pull's cache."""
    for sub in subscriptions:
        if sub.expressionType == ExpressionType.SQL92:
            try:
                compile_cached(sub.subString)
            except FilterError as exc:
                log.warning("Parse consumer filter data error, group %s topic %s: %s", group, sub.topic, exc)
