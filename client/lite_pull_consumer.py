"""LitePullConsumer: RocketMQ's DefaultLitePullConsumer on asyncio.

Either ``subscribe`` (queues split among the group's members by rebalancing every 20 s and at
once on NOTIFY_CONSUMER_IDS_CHANGED) or ``assign`` (a fixed set). One background task per queue
long-polls the broker and fills a bounded buffer; ``poll`` hands out one pulled batch at a time.
Offsets are committed by ``commit()`` or, with auto-commit, every 5 s and at shutdown.

The rebalancing, pulling and offsets are the parts of client/mq_consumer_inner.py, shared with
the push consumer; this class adds the buffer that ``poll`` reads.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from typing import Self

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import AllocateMessageQueueStrategy, MessageQueue
from rocketmq_py.client.filter_api import build_subscription as build_subscription
from rocketmq_py.client.instance import MQClientInstance
from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.client.mq_consumer_inner import InnerAttribute, MQConsumerInner
from rocketmq_py.client.process_queue import ProcessQueue
from rocketmq_py.client.trace.trace_context import ConsumeReturnType
from rocketmq_py.client.trace.trace_hooks import consume_message_after, consume_message_before
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.protocol.heartbeat import (
    SUB_ALL,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
)
from rocketmq_py.remoting.protocol.message import MessageExt


class LitePullConsumer:
    # Kept by the inner, which reads them when it starts and shuts down.
    shutdown_timeout = InnerAttribute[float]()
    start_timestamp = InnerAttribute[int]()

    def __init__(self, group: str, namesrv_addr: str | None = None, *, instance_name: str = "DEFAULT",
                 pull_batch_size: int = 10, auto_commit: bool = True, auto_commit_interval: float = 5.0,
                 consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp: int | None = None, message_model: MessageModel = MessageModel.CLUSTERING,
                 pull_threshold_for_all: int = 10000, broker_suspend_max_time: float = 20.0,
                 rebalance_interval: float = 20.0,
                 allocate_strategy: AllocateMessageQueueStrategy | str | None = None,
                 session_credentials: SessionCredentials | None = None,
                 use_tls: bool | ssl.SSLContext = False, enable_msg_trace: bool = False,
                 custom_trace_topic: str | None = None) -> None:
        self._inner = inner = MQConsumerInner(
            group, namesrv_addr, consume_type=ConsumeType.CONSUME_ACTIVELY, deliver=self._deliver,
            instance_name=instance_name, pull_batch_size=pull_batch_size, auto_commit=auto_commit,
            auto_commit_interval=auto_commit_interval, consume_from_where=consume_from_where,
            consume_timestamp=consume_timestamp, message_model=message_model,
            pull_threshold_for_all=pull_threshold_for_all, broker_suspend_max_time=broker_suspend_max_time,
            rebalance_interval=rebalance_interval, allocate_strategy=allocate_strategy,
            session_credentials=session_credentials, use_tls=use_tls, enable_msg_trace=enable_msg_trace,
            custom_trace_topic=custom_trace_topic)
        self.group, self.config, self.strategy, self.subscriptions = (
            group, inner.config, inner.strategy, inner.subscriptions)
        # Pulled batches with the ProcessQueue that pulled each: a seek or a rebalance replaces
        # the queue's ProcessQueue, which makes every batch pulled before it stale, whichever
        # way the offset moved.
        self._buffer: asyncio.Queue[tuple[ProcessQueue, list[MessageExt]]] = asyncio.Queue(
            maxsize=max(1, pull_threshold_for_all // pull_batch_size))

    @property
    def _instance(self) -> MQClientInstance | None:
        return self._inner.instance


    # -- setup ------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = SUB_ALL) -> None:
        """A tag expression (``"A || B"``, ``*``) or a MessageSelector (``MessageSelector.by_sql``)."""
        self._inner.subscribe(topic, expression)

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalancing); may be called again while running."""
        self._inner.assign(queues)

    async def start(self) -> None:
        await self._inner.start()

    async def shutdown(self) -> None:
        """Stop pulling, commit, unregister: all within ``shutdown_timeout``, brokers up or not."""
        await self._inner.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._inner.process_queue_table)

    async def rebalance(self) -> None:
        await self._inner.require_rebalance().do_rebalance()

    # -- consuming --------------------------------------------------------------------------

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """The next pulled batch, or [] after ``timeout`` seconds with nothing to give."""
        table = self._inner.require_rebalance().process_queue_table
        deadline = time.monotonic() + timeout
        while True:
            if not self._buffer.empty():  # a consumer behind its pulls: no timer to set up
                pq, msgs = self._buffer.get_nowait()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                try:
                    # A deadline on this task, not wait_for's task around get(): two loop turns
                    # fewer between a pull's answer and the caller.
                    async with asyncio.timeout(remaining):
                        pq, msgs = await self._buffer.get()
                except TimeoutError:
                    return []
            if table.get(pq.mq) is not pq or pq.paused or not msgs:
                continue  # the queue was reassigned or sought since this batch was pulled
            pq.consumed_offset = msgs[-1].queue_offset + 1
            return msgs

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """A pulled batch into the buffer ``poll`` reads, traced as DefaultLitePullConsumerImpl
        writes it: SubBefore and SubAfter when pulled."""
        trace = self._inner.trace
        if trace is not None:
            before = consume_message_before(trace, self.group, msgs)
            if before is not None:
                consume_message_after(trace, before, len(msgs), True, ConsumeReturnType.SUCCESS)
        await self._buffer.put((pq, msgs))

    async def commit(self) -> None:
        await self._inner.commit()

    def committed_offsets(self) -> dict[MessageQueue, int]:
        return self._inner.committed_offsets()

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` next, dropping what was pulled before. As Java's
        seek: the queue must be assigned, and the offset within the queue's min and max
        offsets, which are asked of the broker."""
        await self._inner.seek(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self._inner.seek_to(RequestCode.GET_MIN_OFFSET, mq)

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self._inner.seek_to(RequestCode.GET_MAX_OFFSET, mq)

    def pause(self, queues: Sequence[MessageQueue]) -> None:
        self._inner.pause(queues, True)

    def resume(self, queues: Sequence[MessageQueue]) -> None:
        self._inner.pause(queues, False)
