"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ for orderly consumption (docs/behaviours.md#orderly-consumption-locks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.heartbeat import LockBatchRequestBody, LockBatchResponseBody

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController


class QueueLockProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def lock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.decode_request(request.body, "lock body")
        locked = self.broker.rebalance_lock_manager.try_lock_batch(
            body.consumerGroup, [mq.key() for mq in body.mqSet], body.clientId)
        answer = LockBatchResponseBody(lockOKMQSet=[mq for mq in body.mqSet if mq.key() in locked])
        return request.response(body=answer.encode())

    async def unlock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.decode_request(request.body, "unlock body")
        self.broker.rebalance_lock_manager.unlock_batch(body.consumerGroup, [mq.key() for mq in body.mqSet],
                                                        body.clientId)
        return request.response()


