"""CONSUMER_SEND_MSG_BACK: a consumer hands back a message it failed (docs/behaviours.md#retry-and-dead-letter).

The broker re-reads the message from its own CommitLog (the client sends only its offset) and
stores a copy on ``%RETRY%<group>`` parked for delay level ``3 + reconsumeTimes`` (or the level
asked for), keeping the first delivery's message id in ORIGIN_MESSAGE_ID and the topic it came
from in RETRY_TOPIC; past the group's max reconsume times, or when asked with a negative level,
the copy goes to ``%DLQ%<group>`` instead, undelayed.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from rocketmq_py.broker.topic_config_manager import DLQ_NUMS_PER_GROUP, DLQ_PERM
from rocketmq_py.remoting.codes import V3_4_9, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.broker import ConsumerSendMsgBackRequestHeader
from rocketmq_py.remoting.protocol.message import MessageConst, RecordError, decode_record
from rocketmq_py.remoting.protocol.topic import PermName, dlq_topic, retry_topic
from rocketmq_py.store.commit_log import inner_from_ext

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")


class SendMessageBackProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def consumer_send_msg_back(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ConsumerSendMsgBackRequestHeader)
        broker = self.broker
        group_config = broker.subscription_group_manager.find_subscription_group_config(h.group)
        if group_config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group not exist, {h.group}")
        if not PermName.is_writeable(broker.broker_config.brokerPermission):
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{broker.broker_config.brokerIP1}] sending message is forbidden")
        if group_config.retryQueueNums <= 0:
            return request.response()  # the group wants no retries: the message is dropped
        # The message is looked up before the retry topic is created (Java creates it first):
        # a send-back of an offset that holds no message changes nothing.
        data = broker.message_store.look_message_by_offset(h.offset) if h.offset >= 0 else None
        try:
            msg = decode_record(data) if data is not None else None
        except RecordError:
            msg = None
        if msg is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        topics = broker.topic_config_manager
        new_topic = retry_topic(h.group)
        queue_id = random.randrange(group_config.retryQueueNums)
        topic_config = topics.create_topic_in_send_message_back_method(
            new_topic, group_config.retryQueueNums, PermName.PERM_READ | PermName.PERM_WRITE)
        if not PermName.is_writeable(topic_config.perm):
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")
        props = msg.properties
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        # The broker-side id of the first delivery follows every later copy (UNIQ_KEY, the id
        # users see, is kept with the other properties).
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = msg.offset_msg_id
        max_times = group_config.retryMaxTimes
        if request.version >= V3_4_9 and h.maxReconsumeTimes is not None:
            max_times = h.maxReconsumeTimes
        dlq_key: tuple[str, str] | None = None
        if msg.reconsume_times >= max_times or h.delayLevel < 0:
            new_topic = dlq_topic(h.group)
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            topics.create_topic_in_send_message_back_method(new_topic, DLQ_NUMS_PER_GROUP, DLQ_PERM)
            props.pop(MessageConst.DELAY_TIME_LEVEL, None)
            log.info("message %s of group %s reconsumed %d times, moved to %s", msg.msg_id, h.group,
                     msg.reconsume_times, new_topic)
            target = (new_topic, queue_id)
            dlq_key = (h.group, h.originTopic or props.get(MessageConst.RETRY_TOPIC) or msg.topic)
        else:
            level = h.delayLevel or 3 + msg.reconsume_times
            schedule = broker.schedule_message_service
            target = schedule.park(props, new_topic, queue_id, min(level, schedule.max_delay_level))
        inner = inner_from_ext(msg, broker.store_host)
        inner.topic, inner.queue_id = target
        inner.reconsume_times = msg.reconsume_times + 1
        result = await broker.message_store.put_message(inner)
        if not result.ok:
            return request.response(ResponseCode.SYSTEM_ERROR, result.remark or result.status.value)
        broker.stats.put_messages += 1
        if dlq_key is not None:
            broker.stats.dlq_messages[dlq_key] = broker.stats.dlq_messages.get(dlq_key, 0) + 1
        await topics.written(new_topic)  # created for it, maybe (or by a heartbeat): on disk before the answer
        return request.response()
