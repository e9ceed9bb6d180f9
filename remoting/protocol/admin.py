"""Headers and bodies of the admin queries Java's tools send a broker (docs/admin-codes.md).

Header fields are Java's (a field without a default is ``@CFNotNull`` there); body fields are
the properties fastjson writes for the Java class (its getters), declared alphabetically
because fastjson writes them sorted. Maps keyed by MessageQueue are written the way fastjson
writes them, with object keys (``encode_mq_keyed``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import Field

from rocketmq_py.remoting.header import CommandHeader, Int32, Int64
from rocketmq_py.remoting.protocol.broker import encode_mq_keyed
from rocketmq_py.remoting.protocol.heartbeat import SubscriptionData
from rocketmq_py.remoting.protocol.json_body import JsonBody

# -- headers -----------------------------------------------------------------------------------


@dataclass
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@dataclass
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE (321): ``count`` units of queue ``queueId`` from unit ``index``; with
    ``consumerGroup``, the group's subscription comes back too."""

    topic: str
    queueId: Int32
    index: Int64
    count: Int32
    consumerGroup: str | None = None


@dataclass
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317): ``isOrder`` keeps only order topics."""

    isOrder: bool


@dataclass
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str
    group: str


@dataclass
class QueryCorrectionOffsetHeader(CommandHeader):
    """QUERY_CORRECTION_OFFSET (308): ``filterGroups`` comma-separated."""

    compareGroup: str
    topic: str
    filterGroups: str | None = None


@dataclass
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314): no ``topic`` clones every topic the source group has offsets in."""

    srcGroup: str
    destGroup: str
    topic: str | None = None
    offline: bool = False


@dataclass
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309), forwarded by the broker to the named consumer."""

    consumerGroup: str
    clientId: str | None = None
    msgId: str | None = None
    brokerName: str | None = None


@dataclass
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str
    group: str
    clientAddr: str | None = None


@dataclass
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315): ``statsName`` such as TOPIC_PUT_NUMS, ``statsKey`` a topic
    or ``topic@group``."""

    statsName: str
    statsKey: str


@dataclass
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    """RESUME_CHECK_HALF_MESSAGE (323): the half message's offset message id."""

    msgId: str | None = None


# -- bodies ------------------------------------------------------------------------------------


class GroupList(JsonBody):
    """QUERY_TOPIC_CONSUME_BY_WHO's answer (a HashSet in Java: no order)."""

    groupList: list[str] = Field(default_factory=list)


class ConsumeQueueData(JsonBody):
    """One consume-queue unit as QUERY_CONSUME_QUEUE shows it. fastjson writes the primitives
    always (``eval`` false by default) and leaves the null strings out."""

    bitMap: str | None = None
    eval: bool = False
    extendDataJson: str | None = None
    msg: str | None = None
    physicOffset: int
    physicSize: int
    tagsCode: int


class QueryConsumeQueueResponseBody(JsonBody):
    filterData: str | None = None
    maxQueueIndex: int
    minQueueIndex: int
    queueData: list[ConsumeQueueData] | None = None
    subscriptionData: SubscriptionData | None = None


def encode_consume_stats(consume_tps: float, offset_table: dict[tuple[str, str, int], dict[str, int]]) -> str:
    """A ConsumeStats as fastjson writes it: ``consumeTps`` then the MessageQueue-keyed
    ``offsetTable`` of OffsetWrapper objects (brokerOffset, consumerOffset, lastTimestamp)."""
    table = encode_mq_keyed("offsetTable", offset_table).decode()
    return '{"consumeTps":' + json.dumps(float(consume_tps)) + "," + table[1:]


def encode_consume_stats_list(broker_addr: str, stats: list[dict[str, list[str]]], total_diff: int) -> bytes:
    """ConsumeStatsList: ``consumeStatsList`` is a list of one-entry maps, group -> that group's
    ConsumeStats per topic, each already encoded by ``encode_consume_stats``."""
    groups = ",".join(
        "{" + ",".join(f"{json.dumps(group)}:[{','.join(per_topic)}]" for group, per_topic in entry.items()) + "}"
        for entry in stats)
    return ('{"brokerAddr":' + json.dumps(broker_addr) + ',"consumeStatsList":[' + groups + '],"totalDiff":'
            + str(total_diff) + "}").encode()


class MessageQueueBody(JsonBody):
    brokerName: str
    queueId: int
    topic: str


class QueueTimeSpan(JsonBody):
    """One queue of QUERY_CONSUME_TIME_SPAN. The ``...Str`` fields are getters in Java, so
    fastjson writes them: the times as ``yyyy-MM-dd#HH:mm:ss:SSS``."""

    consumeTimeStamp: int
    consumeTimeStampStr: str
    delayTime: int
    maxTimeStamp: int
    maxTimeStampStr: str
    messageQueue: MessageQueueBody
    minTimeStamp: int
    minTimeStampStr: str


class QueryConsumeTimeSpanBody(JsonBody):
    consumeTimeSpanSet: list[QueueTimeSpan] = Field(default_factory=list)


class QueryCorrectionOffsetBody(JsonBody):
    correctionOffsets: dict[int, int] = Field(default_factory=dict)


class ProducerInfo(JsonBody):
    clientId: str
    language: str
    lastUpdateTimestamp: int
    remoteIP: str
    version: int


class ProducerTableInfo(JsonBody):
    """GET_ALL_PRODUCER_INFO: producer group -> its connected producers."""

    data: dict[str, list[ProducerInfo]] = Field(default_factory=dict)



class BrokerStatsItem(JsonBody):
    avgpt: float
    sum: int
    tps: float


class BrokerStatsData(JsonBody):
    """VIEW_BROKER_STATS_DATA's answer: one stats item over the last minute, hour and day."""

    statsDay: BrokerStatsItem
    statsHour: BrokerStatsItem
    statsMinute: BrokerStatsItem
