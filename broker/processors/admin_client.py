"""Admin requests answered with the clients' help (Java's AdminBrokerProcessor.callConsumer and
Broker2Client.getConsumeStatus, the parts mqadmin's consumerStatus, queryMsgById -d,
getConsumerStatus and producer use).

GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY go to one consumer's connection and its
answer comes back as it is; INVOKE_BROKER_TO_GET_CONSUMER_STATUS asks every consumer of a group
for its offsets; GET_ALL_PRODUCER_INFO lists the producers connected here (docs/admin-codes.md).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from rocketmq_py.remoting.codes import V3_0_7_SNAPSHOT, V3_1_8_SNAPSHOT, LanguageCode, RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.exceptions import RemotingError, RemotingTimeoutError
from rocketmq_py.remoting.protocol.admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerStatusRequestHeader,
    ProducerInfo,
    ProducerTableInfo,
)
from rocketmq_py.remoting.protocol.broker import decode_mq_keyed, encode_mq_keyed
from rocketmq_py.remoting.protocol.message import decode_offset_msg_id

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

# How long the broker waits for a client it forwards an admin request to (Java: 5 s).
CALL_CLIENT_TIMEOUT = 5.0

_LANG_NAMES = {c.value: c.name for c in LanguageCode}


def encode_consumer_status(table: dict[str, dict[tuple[str, str, int], int]]) -> bytes:
    """GetConsumerStatusBody with ``consumerTable`` (client id -> its MessageQueue-keyed
    offsets) and an empty ``messageQueueTable``, as the broker writes it."""
    parts = []
    for client_id, offsets in table.items():
        inner = encode_mq_keyed("t", offsets).decode()[len('{"t":'):-1]
        parts.append(f'"{client_id}":{inner}')
    return ('{"consumerTable":{' + ",".join(parts) + '},"messageQueueTable":{}}').encode()


class AdminClientProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def call_consumer(self, request: RemotingCommand, code: int, group: str, client_id: str,
                            ext: dict[str, str], body: bytes | None) -> RemotingCommand:
        """``ext`` and ``body`` sent to one consumer as ``code``; its answer returned to
        ``request`` as it is (Java's callConsumer, with its remarks)."""
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        client = info.find_channel(client_id) if info is not None else None
        if client is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if client.version < V3_1_8_SNAPSHOT:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> Version "
                                    f"<{client.version}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT")
        try:
            answer = await client.channel.invoke(RemotingCommand.request(code, ext, body), CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            return request.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                    f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except RemotingError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return request.response(answer.code, answer.remark, body=answer.body)

    async def get_consumer_running_info(self, conn: RemotingConnection, request: RemotingCommand
                                        ) -> RemotingCommand:
        ext = dict(request.ext_fields or {})
        return await self.call_consumer(request, RequestCode.GET_CONSUMER_RUNNING_INFO, ext.get("consumerGroup", ""),
                                        ext.get("clientId", ""), ext, request.body)

    async def consume_message_directly(self, conn: RemotingConnection, request: RemotingCommand
                                       ) -> RemotingCommand:
        """The message named by its offset message id, handed to one consumer to consume now
        (``mqadmin queryMsgById -g -d``); the consumer's ConsumeMessageDirectlyResult comes back."""
        h = request.decode_header(ConsumeMessageDirectlyResultRequestHeader)
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = self.broker.broker_config.brokerName
        body = request.body
        try:
            _, offset = decode_offset_msg_id(h.msgId or "")
        except ValueError:
            offset = -1  # Java goes on without the message when the id does not decode
        if offset >= 0:
            body = self.broker.message_store.look_message_by_offset(offset) or body
        return await self.call_consumer(request, RequestCode.CONSUME_MESSAGE_DIRECTLY, h.consumerGroup,
                                        h.clientId or "", ext, body)

    async def get_consumer_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Each online consumer's offsets for the topic (or only ``clientAddr``'s, which names a
        client id as in Java), asked with GET_CONSUMER_STATUS_FROM_CLIENT."""
        h = request.decode_header(GetConsumerStatusRequestHeader)
        info = self.broker.consumer_manager.get_consumer_group_info(h.group)
        if info is None or not info.channel_info_table:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"No Any Consumer online in the consumer group: [{h.group}]")
        table: dict[str, dict[tuple[str, str, int], int]] = {}
        for client in list(info.channel_info_table.values()):
            if client.version < V3_0_7_SNAPSHOT:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"the client does not support this feature. version={client.version}")
            if h.clientAddr and h.clientAddr != client.client_id:
                continue
            ask = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                                          {"topic": h.topic, "group": h.group})
            try:
                answer = await client.channel.invoke(ask, CALL_CLIENT_TIMEOUT)
                if answer.code == ResponseCode.SUCCESS and answer.body:
                    table[client.client_id] = {k: int(v) for k, v in
                                               decode_mq_keyed(answer.body, "messageQueueTable").items()}
            except (RemotingError, ValueError, KeyError, IndexError) as exc:
                log.error("[get-consumer-status] get consumer status exception. topic=%s, group=%s, error=%s",
                          h.topic, h.group, exc)
            if h.clientAddr:
                break
        return request.response(body=encode_consumer_status(table))

    async def get_all_producer_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Every producer group with its connected producers (``mqadmin producer``)."""
        now_ms, now = int(time.time() * 1000), time.monotonic()
        data = {group: [ProducerInfo(clientId=c.client_id, language=_LANG_NAMES.get(c.language, "OTHER"),
                                     lastUpdateTimestamp=now_ms - int((now - c.last_update) * 1000),
                                     remoteIP=c.client_addr, version=c.version)
                        for c in channels.values()]
                for group, channels in self.broker.producer_manager.group_channel_table.items()}
        return request.response(body=ProducerTableInfo(data=data).encode())
