"""TransactionalMessageCheckService: ask producers about half messages nobody settled.

Every ``transactionCheckInterval`` one round walks the half queue from the offset the internal
group CID_RMQ_SYS_TRANS reached, skipping half messages that have an op record. A half message
older than ``transactionTimeOut`` (or its CHECK_IMMUNITY_TIME_IN_SECONDS) is re-put to the half
queue with TRANSACTION_CHECK_TIMES raised -- the copy is what the next round looks at -- and one
live producer channel of its PGROUP gets CHECK_TRANSACTION_STATE naming the copy. After
``transactionCheckMax`` checks the message goes to TRANS_CHECK_MAX_TIME_TOPIC with a log line.
Only the round's bookkeeping (which offsets are settled, how far the offsets may move) is pure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocketmq_py.broker.topic_config_manager import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketmq_py.broker.transaction.bridge import (
    CID_RMQ_SYS_TRANS,
    HALF_QUEUE_ID,
    TransactionalMessageBridge,
    check_record,
)
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.header import parse_int, parse_long
from rocketmq_py.remoting.protocol.message import MessageConst, MessageExt, encode_record
from rocketmq_py.remoting.protocol.transaction import CheckTransactionStateRequestHeader

if TYPE_CHECKING:
    from rocketmq_py.broker.config import BrokerConfig
    from rocketmq_py.broker.consumer_offset_manager import ConsumerOffsetManager
    from rocketmq_py.broker.producer_manager import ProducerManager

log = logging.getLogger("rocketmq.broker")

# One round spends at most this long on a queue (TransactionalMessageServiceImpl.MAX_PROCESS_TIME_LIMIT).
MAX_PROCESS_TIME_LIMIT = 60.0
# Op records read per round; the rest wait for the next round (the op offset only moves forward).
MAX_OP_MESSAGES_PER_ROUND = 100_000


@dataclass
class OpProgress:
    """What the op records say, relative to the half queue's check offset."""

    # half queue offset (>= the check offset) -> op queue offset that settled it
    removed: dict[int, int] = field(default_factory=dict)
    # op queue offsets whose half message needs no more attention
    done_ops: set[int] = field(default_factory=set)


def read_op_progress(ops: Iterable[tuple[int, int]], half_offset: int) -> OpProgress:
    """Sort op records into those settling a half message still ahead of the check offset and
    those that settle one already behind it (done; fillOpRemoveMap)."""
    progress = OpProgress()
    for op_offset, settled in ops:
        if settled < half_offset:
            progress.done_ops.add(op_offset)
        else:
            progress.removed[settled] = op_offset
    return progress


def next_op_offset(op_offset: int, done_ops: set[int]) -> int:
    """The op offset moves over a contiguous run of done op records only (calculateOpOffset):
    an op record not yet matched to a passed half message must be read again next round."""
    while op_offset in done_ops:
        op_offset += 1
    return op_offset


def check_times(msg: MessageExt) -> int:
    """TRANSACTION_CHECK_TIMES as Java's Integer.parseInt reads it; 0 when it cannot (a producer
    may set the property on its half message, and Java's check thread would only fail on it)."""
    try:
        return parse_int(msg.properties.get(MessageConst.TRANSACTION_CHECK_TIMES, "0"))
    except ValueError:
        return 0


def immunity_ms(msg: MessageExt, transaction_timeout: int) -> int:
    """How long after its birth a half message is left alone (getImmunityTime)."""
    raw = msg.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
    # Java's getLong: Long.parseLong, -1 when absent or unreadable; and -1 means the default.
    try:
        seconds = parse_long(raw) if raw is not None else -1
    except ValueError:
        seconds = -1
    return transaction_timeout if seconds == -1 else seconds * 1000


class TransactionalMessageCheckService:
    def __init__(self, bridge: TransactionalMessageBridge, config: BrokerConfig, offsets: ConsumerOffsetManager,
                 producers: ProducerManager, broker_name: str) -> None:
        self.bridge = bridge
        self.config = config
        self.offsets = offsets
        self.producers = producers
        self.broker_name = broker_name
        self._task: asyncio.Task[None] | None = None
        self.checks_sent = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        log.info("transaction check service started, interval %s ms", self.config.transactionCheckInterval)
        while True:
            await asyncio.sleep(max(self.config.transactionCheckInterval, 10) / 1000)
            try:
                await self.check()
            except Exception:
                log.exception("transaction check round failed")

    def _offset(self, topic: str) -> int:
        offset = self.offsets.query_offset(CID_RMQ_SYS_TRANS, topic, HALF_QUEUE_ID)
        if offset < 0:
            # First round: start at the queue's beginning (Java: the min offset).
            offset = max(self.bridge.store.get_min_offset_in_queue(topic, HALF_QUEUE_ID), 0)
        return offset

    async def check(self) -> None:
        """One round over the half queue (TransactionalMessageServiceImpl.check)."""
        store = self.bridge.store
        if store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID) == 0:
            return
        cfg = self.config
        start = time.monotonic()
        start_ms = int(time.time() * 1000)
        half_offset = self._offset(TRANS_HALF_TOPIC)
        op_offset = self._offset(TRANS_OP_HALF_TOPIC)
        progress = read_op_progress(self.bridge.op_messages(HALF_QUEUE_ID, op_offset, MAX_OP_MESSAGES_PER_ROUND),
                                    half_offset)
        max_half = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        i = max(half_offset, store.get_min_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID))
        while i < max_half and time.monotonic() - start < MAX_PROCESS_TIME_LIMIT:
            op = progress.removed.pop(i, None)
            if op is not None:
                progress.done_ops.add(op)
                i += 1
                continue
            msg = self.bridge.half_message_at(i)
            if msg is None:
                i += 1
                continue
            times = check_times(msg)
            if times >= cfg.transactionCheckMax:
                await self._discard(msg)
                i += 1
                continue
            if msg.store_timestamp >= start_ms:
                break  # stored during this round (a copy we just re-put): next round's work
            age = int(time.time() * 1000) - msg.born_timestamp
            immunity = immunity_ms(msg, cfg.transactionTimeOut)
            if 0 <= age < immunity:
                # The queue is in store order and every message waits the same transactionTimeOut,
                # so nothing behind this one is due either. (A longer CHECK_IMMUNITY_TIME_IN_SECONDS
                # holds back the messages behind it too: Java re-puts such a message instead.)
                break
            msg.properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(times + 1)
            copy = await self.bridge.put_back_half_message(msg)
            if copy is None:
                log.warning("put back half message %s failed, will check it next round", msg.offset_msg_id)
                break
            self._send_check(copy)
            i += 1
        if i != half_offset:
            self.offsets.commit_offset(CID_RMQ_SYS_TRANS, TRANS_HALF_TOPIC, HALF_QUEUE_ID, i)
        new_op = next_op_offset(op_offset, progress.done_ops)
        if new_op != op_offset:
            self.offsets.commit_offset(CID_RMQ_SYS_TRANS, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, new_op)

    async def _discard(self, msg: MessageExt) -> None:
        log.error("MsgExt:%s has been checked too many times (%s), so discard it by moving it to system topic %s",
                  msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, msg.offset_msg_id),
                  check_times(msg), TRANS_CHECK_MAX_TIME_TOPIC)
        result = await self.bridge.put_check_max_message(msg)
        if not result.ok:
            log.error("put message to %s failed (%s): %s", TRANS_CHECK_MAX_TIME_TOPIC, result.status.value,
                      msg.offset_msg_id)

    def _send_check(self, half: MessageExt) -> None:
        """CHECK_TRANSACTION_STATE, oneway, to one live producer of the message's group."""
        group = half.properties.get(MessageConst.PRODUCER_GROUP, "")
        channel = self.producers.get_available_channel(group)
        if channel is None:
            log.warning("Check transaction failed, channel is null. groupId=%s", group)
            return
        uniq = half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tranStateTableOffset=half.queue_offset, commitLogOffset=half.commit_log_offset, msgId=uniq,
            transactionId=uniq, offsetMsgId=half.offset_msg_id, bname=self.broker_name)
        body = encode_record(check_record(half))
        try:
            channel.invoke_oneway(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header, body))
            self.checks_sent += 1
        except RemotingError as exc:
            log.warning("check transaction state of %s with %s failed: %s", uniq, channel.remote_addr, exc)
