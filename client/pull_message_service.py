"""PullMessageService: a consumer's pulling, one long-polling task per queue it holds.

Java runs the pull requests of every queue on one thread, each answer scheduling the queue's
next request; on asyncio a task per queue does the same without the queue of requests. A queue
is not pulled while paused (1 s between looks) or while its consumer's flow control says wait,
and after a failed pull it waits 1 s (pullTimeDelayMillsWhenException).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.process_queue import ProcessQueue
from rocketmq_py.client.pull_api_wrapper import PullAPIWrapper
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import SubscriptionData
from rocketmq_py.remoting.protocol.message import MessageExt

log = logging.getLogger("rocketmq.client")

# Where a queue's pulls start when it has no offset yet: RebalanceImpl.compute_pull_from_where.
ComputePullFromWhere = Callable[[MessageQueue], Awaitable[int]]
# Hands a pulled batch on: the lite consumer's buffer, the push consumer's listener.
Deliver = Callable[[ProcessQueue, list[MessageExt]], Awaitable[None]]
# Seconds to wait before a queue's next pull (0: pull now): the push consumer's flow control.
FlowControl = Callable[[ProcessQueue], float]


class PullMessageService:
    def __init__(self, pull_api: PullAPIWrapper, subscriptions: dict[str, SubscriptionData],
                 compute_pull_from_where: ComputePullFromWhere, deliver: Deliver, flow_control: FlowControl | None,
                 pull_batch_size: int, broker_suspend_max_time: float) -> None:
        self.pull_api = pull_api
        self.subscriptions = subscriptions
        self.compute_pull_from_where = compute_pull_from_where
        self.deliver = deliver
        self.flow_control = flow_control
        self.pull_batch_size = pull_batch_size
        self.broker_suspend_max_time = broker_suspend_max_time

    def execute_pull_request(self, pq: ProcessQueue) -> None:
        """Start pulling ``pq``'s queue, until its task is cancelled."""
        pq.task = asyncio.get_running_loop().create_task(self.pull_message(pq))

    async def pull_message(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        sub = self.subscriptions[mq.topic]
        pull_api, deliver, flow_control = self.pull_api, self.deliver, self.flow_control
        while True:
            try:
                if pq.next_offset < 0:
                    pq.next_offset = await self.compute_pull_from_where(mq)
                if pq.paused:
                    await asyncio.sleep(1.0)  # Java's pull delay while paused
                    continue
                if flow_control is not None:
                    delay = flow_control(pq)
                    if delay:
                        await asyncio.sleep(delay)
                        continue
                r = await pull_api.pull_kernel_impl(mq, sub, pq.next_offset, self.pull_batch_size,
                                                    pq.consumed_offset, self.broker_suspend_max_time)
                msgs = pull_api.process_pull_result(mq, sub, r, pq.next_offset)
                if r.code == ResponseCode.SUCCESS:
                    pq.next_offset = int((r.ext_fields or {})["nextBeginOffset"])
                    if msgs:
                        await deliver(pq, msgs)
                elif r.code in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
                    pq.next_offset = int((r.ext_fields or {}).get("nextBeginOffset", pq.next_offset))
                elif r.code != ResponseCode.PULL_NOT_FOUND:
                    raise MQClientError(f"pull {mq} failed: {r.code} {r.remark}", r.code, r.remark)
            except asyncio.CancelledError:
                raise
            except (MQClientError, RemotingError) as exc:
                log.warning("pull of %s failed: %s; retrying in 1 s", mq, exc)
                await asyncio.sleep(1.0)  # pullTimeDelayMillsWhenException
