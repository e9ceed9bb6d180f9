"""TransactionalMessageBridge: how transaction records are shaped and where they go.

A half message is the producer's message parked in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its
real topic and queue kept in REAL_TOPIC / REAL_QID and its transaction bits reset to NOT_TYPE, so
the store dispatches it into the half queue (consumers never subscribe there). The outcome of a
half message is an op message in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id, tag ``d``, body =
the half queue offset as decimal text): the check service reads those to know what is settled.
The record shaping functions are pure; the bridge class adds the store and topic look-ups.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from rocketmq_py.broker.topic_config_manager import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketmq_py.remoting.protocol.message import (
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Host,
    MessageConst,
    MessageExt,
    RecordError,
    decode_record,
    properties_to_string,
    tags_string_to_tags_code,
)
from rocketmq_py.remoting.protocol.topic import PermName
from rocketmq_py.store.commit_log import MessageExtBrokerInner, inner_from_ext
from rocketmq_py.store.message_store import GetMessageStatus, PutMessageResult

if TYPE_CHECKING:
    from rocketmq_py.broker.topic_config_manager import TopicConfigManager
    from rocketmq_py.store.message_store import DefaultMessageStore

# The internal consumer group whose offsets in the half and op topics record check progress
# (MixAll.CID_SYS_RMQ_TRANS).
CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"
# Tag of an op message (TransactionalMessageUtil.REMOVETAG): "this half message is settled".
REMOVE_TAG = "d"
HALF_QUEUE_ID = 0
_RW = PermName.PERM_READ | PermName.PERM_WRITE
# Bits the host layout adds; the store sets them again from the hosts it writes.


def reset_transaction_value(sys_flag: int, transaction_type: int) -> int:
    """``sys_flag`` with its two transaction bits replaced (MessageSysFlag.resetTransactionValue)."""
    return (sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | transaction_type


def parse_half_message_inner(inner: MessageExtBrokerInner, props: dict[str, str]) -> None:
    """Turn a prepared send into its half message, in place: real topic/queue into properties,
    topic -> half topic queue 0, transaction bits -> NOT_TYPE (so the store indexes it)."""
    props[MessageConst.REAL_TOPIC] = inner.topic
    props[MessageConst.REAL_QUEUE_ID] = str(inner.queue_id)
    inner.properties_string = properties_to_string(props)
    inner.sys_flag = reset_transaction_value(inner.sys_flag, TRANSACTION_NOT_TYPE)
    inner.topic = TRANS_HALF_TOPIC
    inner.queue_id = HALF_QUEUE_ID


def end_message_transaction(half: MessageExt, transaction_type: int, store_host: Host) -> MessageExtBrokerInner:
    """The real message a commit writes (EndTransactionProcessor.endMessageTransaction).

    Topic and queue come back from REAL_TOPIC / REAL_QID and PREPAREDTRANSACTIONOFFSET points at
    the half message. The properties string is built before REAL_TOPIC/REAL_QID are dropped, as
    Java does, so the stored record still carries them and TRAN_MSG=true (consumers read that to
    set the transaction id).
    """
    inner = inner_from_ext(half, store_host)
    inner.topic = half.properties.get(MessageConst.REAL_TOPIC, half.topic)
    inner.queue_id = int(half.properties.get(MessageConst.REAL_QUEUE_ID, "0"))
    inner.sys_flag = reset_transaction_value(inner.sys_flag, transaction_type)
    inner.prepared_transaction_offset = half.commit_log_offset
    return inner


def op_message_inner(half_queue_offset: int, queue_id: int, store_host: Host) -> MessageExtBrokerInner:
    """The op record saying the half message at ``half_queue_offset`` is settled."""
    props = {MessageConst.TAGS: REMOVE_TAG, MessageConst.WAIT_STORE_MSG_OK: "false"}
    return MessageExtBrokerInner(
        topic=TRANS_OP_HALF_TOPIC, body=str(half_queue_offset).encode(), queue_id=queue_id,
        properties_string=properties_to_string(props), tags_code=tags_string_to_tags_code(REMOVE_TAG),
        born_timestamp=int(time.time() * 1000), born_host=store_host, store_host=store_host)


def check_record(half: MessageExt) -> MessageExt:
    """The half message as a producer's checker sees it: the real topic and queue back."""
    return replace(half, topic=half.properties.get(MessageConst.REAL_TOPIC, half.topic),
                   queue_id=int(half.properties.get(MessageConst.REAL_QUEUE_ID, str(half.queue_id))))


class TransactionalMessageBridge:
    """Reads and writes of the half, op and check-max topics for one broker."""

    def __init__(self, store: DefaultMessageStore, topics: TopicConfigManager,
                 store_host: Callable[[], Host]) -> None:
        self.store = store
        self.topics = topics
        # A callable: the broker's advertised port is known only once it listens.
        self._store_host = store_host

    @property
    def store_host(self) -> Host:
        return self._store_host()

    def ensure_topic(self, topic: str) -> None:
        # The three system topics have one queue and are created the first time they are used.
        self.topics.create_topic_in_send_message_back_method(topic, 1, _RW)

    def prepare_half_message(self, inner: MessageExtBrokerInner, props: dict[str, str]) -> None:
        """The send path's hook: a TRAN_MSG=true send is stored as a half message. A retry of a
        delayed transactional message (reconsumed and delayed) stays an ordinary message, as in Java."""
        if inner.reconsume_times > 0 and props.get(MessageConst.DELAY_TIME_LEVEL, "0") not in ("", "0"):
            return
        parse_half_message_inner(inner, props)
        self.ensure_topic(TRANS_HALF_TOPIC)

    def look_message(self, commit_log_offset: int) -> MessageExt | None:
        if commit_log_offset < 0:
            return None
        data = self.store.look_message_by_offset(commit_log_offset)
        if data is None:
            return None
        try:
            return decode_record(data)
        except RecordError:
            return None

    def half_message_at(self, queue_offset: int) -> MessageExt | None:
        """The half message at a half-queue offset (None if the queue has nothing there)."""
        result = self.store.get_message(CID_RMQ_SYS_TRANS, TRANS_HALF_TOPIC, HALF_QUEUE_ID, queue_offset, 1)
        if result.status is not GetMessageStatus.FOUND or not result.buffers:
            return None
        return decode_record(result.buffers[0])

    def op_messages(self, queue_id: int, from_offset: int, limit: int) -> list[tuple[int, int]]:
        """(op queue offset, half queue offset it settles) from ``from_offset``, at most ``limit``."""
        found: list[tuple[int, int]] = []
        offset = from_offset
        while len(found) < limit:
            result = self.store.get_message(CID_RMQ_SYS_TRANS, TRANS_OP_HALF_TOPIC, queue_id, offset, 32)
            if result.status is not GetMessageStatus.FOUND:
                break
            for data in result.buffers:
                op = decode_record(data)
                try:
                    found.append((op.queue_offset, int(op.body.decode())))
                except ValueError:
                    found.append((op.queue_offset, -1))  # not an op record we wrote: settles nothing
            offset = result.next_begin_offset
        return found

    async def put_half_message(self, inner: MessageExtBrokerInner) -> PutMessageResult:
        self.ensure_topic(TRANS_HALF_TOPIC)
        return await self.store.put_message(inner)

    async def put_op_message(self, half: MessageExt) -> PutMessageResult:
        self.ensure_topic(TRANS_OP_HALF_TOPIC)
        return await self.store.put_message(op_message_inner(half.queue_offset, half.queue_id, self.store_host),
                                            wait_store_msg_ok=False)

    async def put_back_half_message(self, half: MessageExt) -> MessageExt | None:
        """Re-put a half message (its check count already raised) and return the new copy's
        record, so the check names the copy that is now the live one."""
        inner = inner_from_ext(half, self.store_host)
        inner.topic, inner.queue_id = TRANS_HALF_TOPIC, HALF_QUEUE_ID
        result = await self.store.put_message(inner)
        if not result.ok or result.append_result is None:
            return None
        return replace(half, queue_offset=result.append_result.logics_offset,
                       commit_log_offset=result.append_result.wrote_offset, store_host=self.store_host)

    async def put_check_max_message(self, half: MessageExt) -> PutMessageResult:
        """Park a half message checked too often in TRANS_CHECK_MAX_TIME_TOPIC (never checked again)."""
        self.ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        inner = inner_from_ext(half, self.store_host)
        inner.topic, inner.queue_id = TRANS_CHECK_MAX_TIME_TOPIC, 0
        return await self.store.put_message(inner)
