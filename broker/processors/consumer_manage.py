"""Offsets and queue metadata (Java's ConsumerManageProcessor and the offset part of the admin one):
QUERY/UPDATE_CONSUMER_OFFSET, GET_CONSUMER_LIST_BY_GROUP, GET_MAX/MIN_OFFSET,
SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.broker import (
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_py.remoting.protocol.heartbeat import ConsumerIdList, GetConsumerListByGroupRequestHeader

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController


class ConsumerManageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def query_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryConsumerOffsetRequestHeader)
        offset = self.broker.consumer_offset_manager.query_offset(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return request.response(header=OffsetResponseHeader(offset=offset))
        # A young queue whose first message is still there is read from 0 by a new group,
        # whatever its consumeFromWhere says (docs/behaviours.md#consumer-defaults) -- unless the
        # client says, as 5.x clients may, that it wants to know there is no offset.
        if h.setZeroIfNotFound is not False and \
                self.broker.message_store.get_min_offset_in_queue(h.topic, h.queueId) <= 0:
            return request.response(header=OffsetResponseHeader(offset=0))
        return request.response(ResponseCode.QUERY_NOT_FOUND,
                                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    async def update_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(UpdateConsumerOffsetRequestHeader)
        self.broker.consumer_offset_manager.commit_offset(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return request.response()

    async def get_consumer_list_by_group(self, conn: RemotingConnection, request: RemotingCommand
                                         ) -> RemotingCommand:
        h = request.decode_header(GetConsumerListByGroupRequestHeader)
        info = self.broker.consumer_manager.get_consumer_group_info(h.consumerGroup)
        ids = info.all_client_ids() if info else []
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}")
        return request.response(body=ConsumerIdList(consumerIdList=ids).encode())

    async def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(TopicQueueRequestHeader)
        return request.response(header=OffsetResponseHeader(
            offset=self.broker.message_store.get_max_offset_in_queue(h.topic, h.queueId)))

    async def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(TopicQueueRequestHeader)
        offset = self.broker.message_store.get_min_offset_in_queue(h.topic, h.queueId)
        return request.response(header=OffsetResponseHeader(offset=max(offset, 0)))

    async def search_offset_by_timestamp(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(SearchOffsetRequestHeader)
        return request.response(header=OffsetResponseHeader(
            offset=self.broker.message_store.get_offset_in_queue_by_time(h.topic, h.queueId, h.timestamp)))

    async def get_earliest_msg_storetime(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(TopicQueueRequestHeader)
        return request.response(header=GetEarliestMsgStoretimeResponseHeader(
            timestamp=self.broker.message_store.get_earliest_message_time(h.topic, h.queueId)))
