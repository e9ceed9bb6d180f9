"""Broker request/response headers and bodies (docs/protocol.md#headers)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from rocketmq_py.remoting.header import CommandHeader, Int32, Int64, wire
from rocketmq_py.remoting.protocol.heartbeat import SubscriptionData
from rocketmq_py.remoting.protocol.json_body import JsonBody


@dataclass
class SendMessageRequestHeader(CommandHeader):
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: Int32
    queueId: Int32
    sysFlag: Int32
    bornTimestamp: Int64
    flag: Int32
    properties: str | None = None
    reconsumeTimes: Int32 | None = None
    unitMode: bool | None = None
    batch: bool | None = None
    maxReconsumeTimes: Int32 | None = None
    bname: str | None = None


@dataclass
class SendMessageRequestHeaderV2(SendMessageRequestHeader):
    """V2: the same fields under single-letter keys, to make every send's header smaller.

    A subclass of V1 read straight from the short keys, so the broker decodes a V2 send into
    the header it works with in one step.
    """

    producerGroup: str = wire("a")
    topic: str = wire("b")
    defaultTopic: str = wire("c")
    defaultTopicQueueNums: Int32 = wire("d")
    queueId: Int32 = wire("e")
    sysFlag: Int32 = wire("f")
    bornTimestamp: Int64 = wire("g")
    flag: Int32 = wire("h")
    properties: str | None = wire("i", None)
    reconsumeTimes: Int32 | None = wire("j", None)
    unitMode: bool | None = wire("k", None)
    batch: bool | None = wire("m", None)
    maxReconsumeTimes: Int32 | None = wire("l", None)
    bname: str | None = wire("n", None)

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(v1.producerGroup, v1.topic, v1.defaultTopic, v1.defaultTopicQueueNums, v1.queueId, v1.sysFlag,
                   v1.bornTimestamp, v1.flag, v1.properties, v1.reconsumeTimes, v1.unitMode, v1.batch,
                   v1.maxReconsumeTimes, v1.bname)


@dataclass
class SendMessageResponseHeader(CommandHeader):
    msgId: str
    queueId: Int32
    queueOffset: Int64
    transactionId: str | None = None


def send_response_fields(region: str, trace_on: bool, msg_id: str | None = None, queue_id: int = 0,
                         queue_offset: int = 0) -> dict[str, str]:
    """A send's answer's extFields: the broker's region and trace switch, which Java's
    SendMessageProcessor adds to every send's answer, and for a stored message
    SendMessageResponseHeader's fields (``msg_id`` None: nothing was stored). The one builder of
    them, as a plain dict: every send is answered through it, and the typed header's writer
    would double its cost."""
    fields = {"MSG_REGION": region, "TRACE_ON": "true" if trace_on else "false"}
    if msg_id is not None:
        fields["msgId"] = msg_id
        fields["queueId"] = str(queue_id)
        fields["queueOffset"] = str(queue_offset)
    return fields


@dataclass
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    """CONSUMER_SEND_MSG_BACK (docs/protocol.md#client-management): ``delayLevel`` 0 lets the broker choose
    ``3 + reconsumeTimes``, a negative level sends the message straight to the DLQ."""

    offset: Int64
    group: str
    delayLevel: Int32
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool | None = None
    maxReconsumeTimes: Int32 | None = None
    bname: str | None = None


@dataclass
class PullMessageRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: Int32
    queueOffset: Int64
    maxMsgNums: Int32
    sysFlag: Int32
    commitOffset: Int64
    suspendTimeoutMillis: Int64
    subVersion: Int64
    subscription: str | None = None
    expressionType: str | None = None
    bname: str | None = None


@dataclass
class PullMessageResponseHeader(CommandHeader):
    suggestWhichBrokerId: Int64
    nextBeginOffset: Int64
    minOffset: Int64
    maxOffset: Int64


# PullSysFlag bits (docs/protocol.md#pull)
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL = 0x10


@dataclass
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: Int32
    # 5.x: false asks for QUERY_NOT_FOUND instead of 4.9's "0 for a young queue" answer.
    setZeroIfNotFound: bool | None = None


@dataclass
class OffsetResponseHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP answers."""

    offset: Int64


@dataclass
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: Int32
    commitOffset: Int64


@dataclass
class TopicQueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str
    queueId: Int32


@dataclass
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queueId: Int32
    timestamp: Int64


@dataclass
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Int64


@dataclass
class QueryMessageRequestHeader(CommandHeader):
    topic: str
    key: str
    maxNum: Int32
    beginTimestamp: Int64
    endTimestamp: Int64


@dataclass
class QueryMessageResponseHeader(CommandHeader):
    indexLastUpdateTimestamp: Int64
    indexLastUpdatePhyoffset: Int64


@dataclass
class ViewMessageRequestHeader(CommandHeader):
    offset: Int64


@dataclass
class CreateTopicRequestHeader(CommandHeader):
    topic: str
    defaultTopic: str
    readQueueNums: Int32
    writeQueueNums: Int32
    perm: Int32
    topicFilterType: str
    topicSysFlag: Int32 | None = None
    order: bool | None = None


@dataclass
class DeleteTopicRequestHeader(CommandHeader):
    topic: str


@dataclass
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str


@dataclass
class GetConsumeStatsRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str | None = None


@dataclass
class ConsumerGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_CONNECTION_LIST."""

    consumerGroup: str


@dataclass
class ProducerGroupRequestHeader(CommandHeader):
    """GET_PRODUCER_CONNECTION_LIST."""

    producerGroup: str


@dataclass
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    groupName: str
    removeOffset: bool | None = None


@dataclass
class ResetOffsetRequestHeader(CommandHeader):
    topic: str
    group: str
    timestamp: Int64
    isForce: bool


# -- bodies --------------------------------------------------------------------------------

def encode_mq_keyed(field: str, table: dict[tuple[str, str, int], Any]) -> bytes:
    """fastjson's form of a map keyed by MessageQueue: each key is a JSON object, which is not
    valid JSON, but it is what Java writes and reads (docs/protocol.md#json-bodies)."""
    parts = []
    for (topic, broker, qid), value in table.items():
        key = json.dumps({"brokerName": broker, "queueId": qid, "topic": topic}, separators=(",", ":"))
        parts.append(f"{key}:{json.dumps(value, separators=(',', ':'))}")
    return ("{" + f'"{field}":{{' + ",".join(parts) + "}}").encode()


def decode_mq_keyed(data: bytes, field: str) -> dict[tuple[str, str, int], Any]:
    """Read a MessageQueue-keyed map written by fastjson (or by ``encode_mq_keyed``)."""
    text = data.decode()
    decoder = json.JSONDecoder()
    start = text.index(f'"{field}"')
    pos = text.index("{", start + len(field) + 2) + 1
    out: dict[tuple[str, str, int], Any] = {}
    while True:
        while text[pos] in " ,\n\t\r":
            pos += 1
        if text[pos] == "}":
            return out
        key, pos = decoder.raw_decode(text, pos)
        while text[pos] in " :":
            pos += 1
        value, pos = decoder.raw_decode(text, pos)
        out[(key["topic"], key["brokerName"], int(key["queueId"]))] = value


class ConnectionBody(JsonBody):
    clientAddr: str
    clientId: str
    language: str
    version: int


class ConsumerConnection(JsonBody):
    connectionSet: list[ConnectionBody] = Field(default_factory=list)
    consumeFromWhere: str | None = None
    consumeType: str | None = None
    messageModel: str | None = None
    subscriptionTable: dict[str, SubscriptionData] = Field(default_factory=dict)


class ProducerConnection(JsonBody):
    connectionSet: list[ConnectionBody] = Field(default_factory=list)


