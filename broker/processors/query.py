"""QUERY_MESSAGE (by key, via the index) and VIEW_MESSAGE_BY_ID (by CommitLog offset)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.broker import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController


class QueryMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def query_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryMessageRequestHeader)
        store = self.broker.message_store
        max_num = h.maxNum
        if (request.ext_fields or {}).get("_UNIQUE_KEY_QUERY") == "true":
            max_num = store.config.defaultQueryMaxNum
        found = await store.query_message(h.topic, h.key, max_num, h.beginTimestamp, h.endTimestamp)
        last = store.index_service.files[-1] if store.index_service.files else None
        header = QueryMessageResponseHeader(indexLastUpdateTimestamp=last.end_timestamp if last else 0,
                                            indexLastUpdatePhyoffset=last.end_phy_offset if last else 0)
        if not found:
            return request.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                    header=header)
        return request.response(header=header, body=b"".join(found))

    async def view_message_by_id(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ViewMessageRequestHeader)
        data = self.broker.message_store.look_message_by_offset(h.offset)
        if data is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return request.response(body=data)
