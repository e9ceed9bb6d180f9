"""Admin queries about consumption (Java's AdminBrokerProcessor, the parts mqadmin's topicList,
queryMsgById/ByKey/ByOffset (message tracking), brokerConsumeStats and the console use).

QUERY_TOPIC_CONSUME_BY_WHO, GET_BROKER_CONSUME_STATS, QUERY_CONSUME_TIME_SPAN,
QUERY_CORRECTION_OFFSET and CLONE_GROUP_OFFSET answer as 4.9.7's broker does
(docs/admin-codes.md).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import TYPE_CHECKING

from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.admin import (
    CloneGroupOffsetRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GroupList,
    MessageQueueBody,
    QueryConsumeTimeSpanBody,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetBody,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    QueueTimeSpan,
    encode_consume_stats,
    encode_consume_stats_list,
)
from rocketmq_py.remoting.protocol.json_body import unquote_int_keys

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

# Java's Long.MAX_VALUE: QUERY_CORRECTION_OFFSET's "no correction" for a queue.
LONG_MAX = 2**63 - 1


def format_date(millis: int) -> str:
    """Java's UtilAll.formatDate(date, "yyyy-MM-dd#HH:mm:ss:SSS") in local time."""
    moment = dt.datetime.fromtimestamp(millis / 1000)
    return moment.strftime("%Y-%m-%d#%H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


class AdminConsumeProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def query_topic_consume_by_who(self, conn: RemotingConnection, request: RemotingCommand
                                         ) -> RemotingCommand:
        """The groups online with a subscription to the topic, plus every group holding offsets
        in it (so groups that are offline now still show)."""
        h = request.decode_header(QueryTopicConsumeByWhoRequestHeader)
        broker = self.broker
        groups = broker.consumer_manager.query_topic_consume_by_who(h.topic)
        groups |= broker.consumer_offset_manager.which_group_by_topic(h.topic)
        return request.response(body=GroupList(groupList=sorted(groups)).encode())

    async def fetch_all_consume_stats_in_broker(self, conn: RemotingConnection, request: RemotingCommand
                                                ) -> RemotingCommand:
        """Every subscription group's progress on every topic it has offsets in, and the total
        of their lags (``mqadmin brokerConsumeStats``)."""
        h = request.decode_header(GetConsumeStatsInBrokerHeader)
        broker = self.broker
        store = broker.message_store
        offsets = broker.consumer_offset_manager
        broker_name = broker.broker_config.brokerName
        stats_list: list[dict[str, list[str]]] = []
        total_diff = 0
        for group in list(broker.subscription_group_manager.table):
            per_topic: list[str] = []
            for topic in sorted(offsets.which_topic_by_consumer(group)):
                config = broker.topic_config_manager.select_topic_config(topic)
                if config is None:
                    log.warning("consumeStats, topic config not exist, %s", topic)
                    continue
                if (h.isOrder and not config.order) or broker.consumer_manager.has_stale_offsets(group, topic):
                    continue
                table: dict[tuple[str, str, int], dict[str, int]] = {}
                for qid in range(config.writeQueueNums):
                    broker_offset = max(store.get_max_offset_in_queue(topic, qid), 0)
                    consumer_offset = max(offsets.query_offset(group, topic, qid), 0)
                    last = store.get_message_store_timestamp(topic, qid, consumer_offset - 1) \
                        if consumer_offset > 0 else 0
                    table[(topic, broker_name, qid)] = {"brokerOffset": broker_offset,
                                                        "consumerOffset": consumer_offset,
                                                        "lastTimestamp": max(last, 0)}
                    total_diff += broker_offset - consumer_offset
                per_topic.append(encode_consume_stats(broker.stats_manager.tps_group_get_nums(group, topic), table))
            stats_list.append({group: per_topic})
        return request.response(body=encode_consume_stats_list(broker.broker_addr, stats_list, total_diff))

    async def query_consume_time_span(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Per queue: the oldest and newest store times, the store time of the group's last
        consumed message, and how long the next one has waited."""
        h = request.decode_header(QueryConsumeTimeSpanRequestHeader)
        broker = self.broker
        config = broker.topic_config_manager.select_topic_config(h.topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = broker.message_store
        spans = []
        now = int(time.time() * 1000)
        for qid in range(config.writeQueueNums):
            min_time = store.get_earliest_message_time(h.topic, qid)
            max_offset = store.get_max_offset_in_queue(h.topic, qid)
            max_time = store.get_message_store_timestamp(h.topic, qid, max_offset - 1)
            consumer_offset = broker.consumer_offset_manager.query_offset(h.group, h.topic, qid)
            consume_time = (store.get_message_store_timestamp(h.topic, qid, consumer_offset - 1)
                            if consumer_offset > 0 else min_time)
            delay = 0
            if consumer_offset < max_offset:
                delay = now - store.get_message_store_timestamp(h.topic, qid, consumer_offset)
            spans.append(QueueTimeSpan(
                consumeTimeStamp=consume_time, consumeTimeStampStr=format_date(consume_time), delayTime=delay,
                maxTimeStamp=max_time, maxTimeStampStr=format_date(max_time),
                messageQueue=MessageQueueBody(brokerName=broker.broker_config.brokerName, queueId=qid, topic=h.topic),
                minTimeStamp=min_time, minTimeStampStr=format_date(min_time)))
        return request.response(body=QueryConsumeTimeSpanBody(consumeTimeSpanSet=spans).encode())

    async def query_correction_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Per queue, the least offset (still in the queue) any group but the filtered ones has
        committed; Long.MAX_VALUE where it is past the compare group's offset."""
        h = request.decode_header(QueryCorrectionOffsetHeader)
        offsets = self.broker.consumer_offset_manager
        filtered = {g for g in (h.filterGroups or "").split(",") if g.strip()}
        correction: dict[int, int] = {}
        store = self.broker.message_store
        # Java's queryMinOffsetInAllGroup also deletes the filtered groups' offsets as it skips
        # them; here they are only skipped.
        for group in offsets.which_group_by_topic(h.topic) - filtered:
            for qid, offset in offsets.query_offsets(group, h.topic).items():
                if offset >= store.get_min_offset_in_queue(h.topic, qid):
                    correction[qid] = min(correction.get(qid, offset), offset)
        for qid, offset in offsets.query_offsets(h.compareGroup, h.topic).items():
            if qid in correction:
                correction[qid] = LONG_MAX if correction[qid] > offset else correction[qid]
        # fastjson writes the Integer keys bare ({0:12}); Java's tools read either form.
        text = QueryCorrectionOffsetBody(correctionOffsets=correction).model_dump_json()
        return request.response(body=unquote_int_keys(text, "correctionOffsets").encode())

    async def clone_group_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Copy one group's committed offsets to another, on one topic or every topic it has."""
        h = request.decode_header(CloneGroupOffsetRequestHeader)
        broker = self.broker
        offsets = broker.consumer_offset_manager
        topics = {h.topic} if h.topic and h.topic.strip() else offsets.which_topic_by_consumer(h.srcGroup)
        for topic in topics:
            if broker.topic_config_manager.select_topic_config(topic) is None:
                log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
                continue
            if not h.offline and broker.consumer_manager.has_stale_offsets(h.srcGroup, topic):
                log.warning("[cloneGroupOffset], the consumer group[%s], topic[%s] not exist", h.srcGroup, topic)
                continue
            offsets.clone_offset(h.srcGroup, h.destGroup, topic)
        return request.response()
