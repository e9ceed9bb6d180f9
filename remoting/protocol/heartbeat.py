"""Client-management bodies: HEART_BEAT's HeartbeatData and its parts (docs/protocol.md#client-management).

Field names and enum names are Java's; fields are declared alphabetically because fastjson
writes them sorted. ``filterClassSource`` is never serialized by Java and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

from rocketmq_py.remoting.header import CommandHeader
from rocketmq_py.remoting.protocol.json_body import JsonBody

# Enums list their members in Java's order: a member's position is the ordinal some clients send.


class ConsumeType(StrEnum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push


class MessageModel(StrEnum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(StrEnum):
    """In Java's order: the C++ client sends the ordinal (docs/clients.md)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    # The next three are deprecated in Java but still sent by old clients.
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ExpressionType(StrEnum):
    TAG = "TAG"
    SQL92 = "SQL92"


SUB_ALL = "*"


class SubscriptionData(JsonBody):
    classFilterMode: bool = False
    codeSet: list[int] = Field(default_factory=list)
    expressionType: str = ExpressionType.TAG
    subString: str = SUB_ALL
    subVersion: int = 0
    tagsSet: list[str] = Field(default_factory=list)
    topic: str


class ConsumerData(JsonBody):
    consumeFromWhere: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consumeType: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    groupName: str
    messageModel: MessageModel = MessageModel.CLUSTERING
    subscriptionDataSet: list[SubscriptionData] = Field(default_factory=list)
    unitMode: bool = False


class ProducerData(JsonBody):
    groupName: str


class HeartbeatData(JsonBody):
    clientID: str
    consumerDataSet: list[ConsumerData] = Field(default_factory=list)
    producerDataSet: list[ProducerData] = Field(default_factory=list)


class ConsumerIdList(JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP's answer."""

    consumerIdList: list[str] = Field(default_factory=list)


class MessageQueueBody(JsonBody):
    """A MessageQueue as it appears in JSON bodies."""

    brokerName: str
    queueId: int
    topic: str

    def key(self) -> tuple[str, str, int]:
        return (self.topic, self.brokerName, self.queueId)


class LockBatchRequestBody(JsonBody):
    clientId: str
    consumerGroup: str
    mqSet: list[MessageQueueBody] = Field(default_factory=list)


class LockBatchResponseBody(JsonBody):
    lockOKMQSet: list[MessageQueueBody] = Field(default_factory=list)


class CheckClientRequestBody(JsonBody):
    clientId: str | None = None
    group: str | None = None
    subscriptionData: SubscriptionData | None = None


@dataclass
class UnregisterClientRequestHeader(CommandHeader):
    clientID: str
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumerGroup: str


@dataclass
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumerGroup: str
