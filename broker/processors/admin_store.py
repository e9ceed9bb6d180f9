"""Admin requests about the store (Java's AdminBrokerProcessor, the parts mqadmin's queryCq,
cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic and exportMetadata use, and the
console's resume of a half message's checks).

QUERY_CONSUME_QUEUE shows consume-queue units as they are on disk; the clean-ups run at once
(Java's deleteExpiredCommitLog sets a flag its clean service acts on within 10 s; ours deletes
in the request, with the same reserved-time rule). docs/admin-codes.md lists them.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import TYPE_CHECKING

from rocketmq_py.broker.topic_config_manager import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    RMQ_SYS_TRACE_TOPIC,
    SELF_TEST_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.admin import (
    ConsumeQueueData,
    QueryConsumeQueueRequestHeader,
    QueryConsumeQueueResponseBody,
    ResumeCheckHalfMessageRequestHeader,
)
from rocketmq_py.remoting.protocol.heartbeat import ExpressionType
from rocketmq_py.remoting.protocol.message import MessageConst, decode_offset_msg_id
from rocketmq_py.remoting.protocol.route import TopicList
from rocketmq_py.store.commit_log import inner_from_ext
from rocketmq_py.store.config import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

# TopicValidator's system topics, which every 4.9.7 broker lists whatever its config; the broker
# adds the cluster, broker-name and reply topics it creates (TopicConfigManager).
STATIC_SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC,
                                  RMQ_SYS_TRACE_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
                                  SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})

# Topics whose queues CLEAN_UNUSED_TOPIC keeps though no topic config names them.
_KEPT_QUEUES = frozenset({SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC})

# The most units one QUERY_CONSUME_QUEUE returns: Java reads them from one mapped file, whose
# default size is 300,000 units.
MAX_QUERY_UNITS = 300_000


class AdminStoreProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def _filter_data(self, group: str, topic: str) -> str:
        """What Java writes for the group's server-side filter: ``null`` for a tag subscription
        (the ConsumerFilterManager keeps data only for SQL92 ones), else its pretty JSON."""
        sub = self.broker.consumer_manager.find_subscription_data(group, topic)
        if sub is None:
            return f"{group}@{topic} is not online!"
        if sub.expressionType == ExpressionType.TAG:
            return "null"
        # Java's bornTime is when the broker took the filter in, near the client's subVersion.
        return json.dumps({"bornTime": sub.subVersion, "clientVersion": sub.subVersion, "consumerGroup": group,
                           "deadTime": 0, "expression": sub.subString, "expressionType": sub.expressionType,
                           "topic": topic}, indent="\t")

    async def query_consume_queue(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """``count`` units from ``index``, within the file holding it, as stored: CommitLog
        offset, size and tag hash. With ``consumerGroup``, the group's subscription too."""
        h = request.decode_header(QueryConsumeQueueRequestHeader)
        cq = self.broker.message_store.consume_queue_table.get(h.topic, {}).get(h.queueId)
        if cq is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"{h.queueId}@{h.topic} is not exist!")
        body = QueryConsumeQueueResponseBody(maxQueueIndex=cq.max_offset_in_queue,
                                             minQueueIndex=cq.min_offset_in_queue)
        if h.consumerGroup is not None:
            body.subscriptionData = self.broker.consumer_manager.find_subscription_data(h.consumerGroup, h.topic)
            body.filterData = self._filter_data(h.consumerGroup, h.topic)
        count = max(min(h.count, MAX_QUERY_UNITS), 0)
        # At least one unit is read to learn whether the index exists; a count of 0 or less then
        # answers no units, as Java's loop over ``count`` does.
        units = cq.units_from(h.index, max(count, 1) * 20) if h.index >= cq.min_offset_in_queue else None
        if units is None:
            # Java answers SUCCESS without units, saying why in the remark.
            return request.response(remark=f"Index {h.index} of {h.queueId}@{h.topic} is not exist!",
                                    body=body.encode())
        body.queueData = [ConsumeQueueData(physicOffset=phy, physicSize=size, tagsCode=tags)
                          for phy, size, tags in itertools.islice(units, count)]
        return request.response(body=body.encode())

    async def clean_expired_consume_queue(self, conn: RemotingConnection, request: RemotingCommand
                                          ) -> RemotingCommand:
        log.warning("invoke cleanExpiredConsumeQueue start (from %s).", conn.remote_addr)
        removed = self.broker.message_store.clean_expired_consumer_queue()
        log.warning("invoke cleanExpiredConsumeQueue end: %d queues destroyed.", removed)
        return request.response()

    async def delete_expired_commit_log(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke deleteExpiredCommitLog start (from %s).", conn.remote_addr)
        deleted = self.broker.message_store.delete_expired_files_manually()
        log.warning("invoke deleteExpiredCommitLog end: %d files deleted.", deleted)
        return request.response()

    async def clean_unused_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Consume queues of topics no topic config names any more, destroyed."""
        store = self.broker.message_store
        unused = set(store.consume_queue_table) - set(self.broker.topic_config_manager.table) - _KEPT_QUEUES
        log.warning("invoke cleanUnusedTopic start (from %s): %s", conn.remote_addr, sorted(unused))
        store.delete_topics(unused)
        log.warning("invoke cleanUnusedTopic end.")
        return request.response()

    async def get_system_topic_list_from_broker(self, conn: RemotingConnection, request: RemotingCommand
                                                ) -> RemotingCommand:
        topics = STATIC_SYSTEM_TOPICS | self.broker.topic_config_manager.system_topics
        return request.response(body=TopicList(topicList=sorted(topics)).encode())

    async def resume_check_half_message(self, conn: RemotingConnection, request: RemotingCommand
                                        ) -> RemotingCommand:
        """A half message stored again with its check count at 0, so the broker resumes asking
        its producer about it after it gave up (transactionCheckMax)."""
        h = request.decode_header(ResumeCheckHalfMessageRequestHeader)
        try:
            _, offset = decode_offset_msg_id(h.msgId or "")
        except ValueError:
            offset = -1
        msg = self.broker.transaction_bridge.look_message(offset)
        if msg is None:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.")
        msg.properties[MessageConst.TRANSACTION_CHECK_TIMES] = "0"
        result = await self.broker.message_store.put_message(inner_from_ext(msg, self.broker.store_host))
        if not result.ok:
            log.error("Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
            return request.response(ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        log.info("Put message back to RMQ_SYS_TRANS_HALF_TOPIC. real topic=%s",
                 msg.properties.get(MessageConst.REAL_TOPIC))
        return request.response()
