"""END_TRANSACTION (Java's EndTransactionProcessor): commit or roll back one half message.

The header names the half message by commit-log offset; it must be a half message of the
header's producer group at the header's half-queue offset, or the answer is SYSTEM_ERROR with
RocketMQ's remark and nothing is written. A commit writes the real message (then the op
record); a rollback writes only the op record; 0 (unknown) writes nothing and answers nothing,
leaving the half message to the check service. Producers send this oneway, so the answers are
for raw clients and tests.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketmq_py.broker.topic_config_manager import TRANS_HALF_TOPIC
from rocketmq_py.broker.transaction.bridge import TransactionalMessageBridge, end_message_transaction
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.processor import RequestProcessor
from rocketmq_py.remoting.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    MessageExt,
)
from rocketmq_py.remoting.protocol.transaction import EndTransactionRequestHeader
from rocketmq_py.store.config import BrokerRole

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

_READ = EndTransactionRequestHeader.decoder()
_OUTCOMES = {TRANSACTION_NOT_TYPE: "UNKNOWN", TRANSACTION_COMMIT_TYPE: "COMMIT", TRANSACTION_ROLLBACK_TYPE: "ROLLBACK"}


def check_prepare_message(half: MessageExt | None, header: EndTransactionRequestHeader) -> str | None:
    """Why ``half`` cannot be ended by this request (checkPrepareMessage), or None if it can.

    Beyond Java's three checks the record must sit in the half topic: an offset that happens to
    hold an ordinary message of a topic is refused rather than re-written.
    """
    if half is None or half.topic != TRANS_HALF_TOPIC:
        return "Find prepared transaction message failed"
    if half.properties.get(MessageConst.PRODUCER_GROUP) != header.producerGroup:
        return "The producer group wrong"
    if half.queue_offset != header.tranStateTableOffset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != header.commitLogOffset:
        return "The commit log offset wrong"
    return None


class EndTransactionProcessor(RequestProcessor):
    def __init__(self, broker: BrokerController, bridge: TransactionalMessageBridge) -> None:
        self.broker = broker
        self.bridge = bridge

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        header = _READ(request.ext_fields or {})
        if self.broker.store_config.brokerRole is BrokerRole.SLAVE:
            return request.response(ResponseCode.SLAVE_NOT_AVAILABLE,
                                    "Message store is slave mode, so end transaction is forbidden.")
        outcome = _OUTCOMES.get(header.commitOrRollback)
        if outcome is None:
            # Java silently answers nothing here; a clear error serves raw clients better.
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"commitOrRollback {header.commitOrRollback} is not 0, 8 (commit) or 12 "
                                    "(rollback)")
        if header.fromTransactionCheck:
            log.info("check producer[%s] transaction state, the producer %s: %s msgId %s", conn.remote_addr,
                     header.producerGroup, outcome, header.msgId)
        if header.commitOrRollback == TRANSACTION_NOT_TYPE:
            # Unknown: the check service will ask a producer later; Java answers nothing.
            if request.remark:
                log.warning("producer %s of %s left %s unknown: %s", conn.remote_addr, header.producerGroup,
                            header.msgId, request.remark)
            return None
        half = self.bridge.look_message(header.commitLogOffset)
        problem = check_prepare_message(half, header)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        assert half is not None
        if header.commitOrRollback == TRANSACTION_COMMIT_TYPE:
            inner = end_message_transaction(half, TRANSACTION_COMMIT_TYPE, self.broker.store_host)
            self.broker.schedule_message_service.park_committed(inner, dict(half.properties))
            # Java writes the committed message without waiting for a sync flush (waitStoreMsgOK
            # false): the producer's END is oneway, nobody is waiting for the answer.
            result = await self.broker.message_store.put_message(inner, wait_store_msg_ok=False)
            if not result.ok:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"store the committed message failed: {result.status.value}")
        op = await self.bridge.put_op_message(half)
        if not op.ok:
            log.warning("put op message of half %s failed (%s): it will be checked again", half.offset_msg_id,
                        op.status.value)
        return request.response(ResponseCode.SUCCESS)
