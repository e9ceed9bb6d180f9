"""PushConsumer: RocketMQ's DefaultMQPushConsumer on asyncio.

It pulls as the lite consumer does, with the same parts (client/mq_consumer_inner.py: rebalanced
queues, one long-polling pull loop per queue, the offset store), and calls your listener for
every message. Concurrent listeners run up to ``consume_concurrency``
calls at once while pulling goes on: each queue's pulled messages wait in its ProcessQueue, and
the queue is not pulled while that caches more than ``pull_threshold_for_queue`` messages (1,000)
or ``pull_threshold_size_for_queue`` MiB (100), or spans more than
``consume_concurrently_max_span`` offsets (2,000) -- Java's flow control, with its 50 ms pull
delay and a log line every 1,000 times. A queue's offset advances only to its lowest message
still being consumed, so a crash re-delivers rather than loses. Orderly listeners consume one
queue at a time, in order, retrying a failed message in place.

Orderly consumers lock their queues at the broker (LOCK_BATCH_MQ), renew every 20 s, treat a
lock as lost 30 s after its last grant, and unlock queues they give up.

Failed messages (docs/behaviours.md#retry-and-dead-letter). A clustering consumer also subscribes to its group's
``%RETRY%`` topic. A message a concurrent listener fails is handed back to the broker
(CONSUMER_SEND_MSG_BACK), which redelivers it through the retry topic after a growing delay and,
past ``max_reconsume_times`` (16), moves it to the group's ``%DLQ%`` topic; only when the broker
cannot be reached is it retried here, after ``local_retry_delay``. Messages from the retry topic
reach the listener under their original topic and message id, with ``reconsume_times`` counting
the deliveries before. An orderly listener's failure suspends its queue and retries in place (no
later message overtakes it) up to ``max_reconsume_times`` (unlimited by default, as in Java),
then the message is sent to the DLQ and the queue moves on. Broadcasting consumers drop failed
messages with a log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Self

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.filter_api import build_subscription
from rocketmq_py.client.instance import CLIENT_INNER_PRODUCER_GROUP, MQClientInstance
from rocketmq_py.client.message import Message
from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.client.mq_consumer_inner import InnerAttribute, MQConsumerInner
from rocketmq_py.client.process_queue import ProcessQueue
from rocketmq_py.client.producer import Producer
from rocketmq_py.client.trace.trace_context import ConsumeReturnType, TraceContext
from rocketmq_py.client.trace.trace_hooks import consume_message_after, consume_message_before
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import SUB_ALL, ConsumeType, MessageModel
from rocketmq_py.remoting.protocol.message import MessageConst, MessageExt
from rocketmq_py.remoting.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, retry_topic

log = logging.getLogger("rocketmq.client")

# rocketmq.client.rebalance.lockInterval (docs/behaviours.md#orderly-consumption-locks).
LOCK_INTERVAL = 20.0
# DefaultMQPushConsumer.maxReconsumeTimes = -1: 16 for concurrent listeners, Integer.MAX_VALUE
# for orderly ones; send-back calls time out after 5 s.
DEFAULT_MAX_RECONSUME_TIMES = 16
ORDERLY_MAX_RECONSUME_TIMES = 2**31 - 1
SEND_BACK_TIMEOUT = 5.0
# DefaultMQPushConsumerImpl.PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL.
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05


class ConsumeConcurrentlyStatus(Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


ConcurrentListener = Callable[[list[MessageExt]], Awaitable[ConsumeConcurrentlyStatus]]
OrderlyListener = Callable[[list[MessageExt]], Awaitable[ConsumeOrderlyStatus]]


class PushConsumer:
    # Kept by the inner, which reads them when it starts and shuts down.
    shutdown_timeout = InnerAttribute[float]()
    start_timestamp = InnerAttribute[int]()

    def __init__(self, group: str, namesrv_addr: str | None = None, *, consume_concurrency: int = 20,
                 max_reconsume_times: int | None = None, local_retry_delay: float = 5.0,
                 suspend_current_queue_time: float = 1.0, pull_batch_size: int = 32,
                 pull_threshold_for_queue: int = 1000, pull_threshold_size_for_queue: int = 100,
                 pull_threshold_for_topic: int = -1, pull_threshold_size_for_topic: int = -1,
                 consume_concurrently_max_span: int = 2000, **kwargs: object) -> None:
        # The other keyword arguments are LitePullConsumer's (MQConsumerInner's settings), among
        # them enable_msg_trace / custom_trace_topic: SubBefore and SubAfter around every
        # listener call, as DefaultMQPushConsumer's ConsumeMessageTraceHookImpl writes them.
        # type-ignored: **kwargs is object to mypy
        self._inner = inner = MQConsumerInner(
            group, namesrv_addr, consume_type=ConsumeType.CONSUME_PASSIVELY, deliver=self._deliver,
            flow_control=self._flow_control_delay, pull_batch_size=pull_batch_size, **kwargs)  # type: ignore[arg-type]
        self.group, self.config, self.strategy, self.subscriptions = (
            group, inner.config, inner.strategy, inner.subscriptions)
        # Flow control, with DefaultMQPushConsumer's names and defaults: a queue is not pulled
        # while it caches this many messages or MiB (the topic limits, when set, are shared
        # out among the topic's queues), or while its oldest and newest cached offsets are
        # further apart than the max span.
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic = pull_threshold_size_for_topic
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.queue_flow_control_times = 0
        self.queue_max_span_flow_control_times = 0
        self._consuming: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.consume_concurrency = consume_concurrency
        self.max_reconsume_times = max_reconsume_times
        self.local_retry_delay = local_retry_delay
        self.suspend_current_queue_time = suspend_current_queue_time
        self._listener: ConcurrentListener | None = None
        self._orderly: OrderlyListener | None = None
        self._slots = asyncio.Semaphore(consume_concurrency)
        self._inner_producer: Producer | None = None

    @property
    def _locks(self) -> dict[MessageQueue, float]:
        """Orderly: queue -> when the broker last granted us its lock."""
        rebalance = self._inner.rebalance
        return rebalance.lock_table if rebalance is not None else {}

    def _require_started(self) -> MQClientInstance:
        return self._inner.require_started()

    def register_message_listener(self, listener: ConcurrentListener) -> None:
        self._listener = listener

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        self._orderly = listener

    @property
    def effective_max_reconsume_times(self) -> int:
        """Java's -1 default: 16 for concurrent listeners, unlimited for orderly ones."""
        if self.max_reconsume_times is not None:
            return self.max_reconsume_times
        return ORDERLY_MAX_RECONSUME_TIMES if self._orderly is not None else DEFAULT_MAX_RECONSUME_TIMES

    def subscribe(self, topic: str, expression: str | MessageSelector = SUB_ALL) -> None:
        """A tag expression (``"A || B"``, ``*``) or a MessageSelector (``MessageSelector.by_sql``)."""
        self._inner.subscribe(topic, expression)

    async def start(self) -> None:
        if self._listener is None and self._orderly is None:
            raise ValueError("register a message listener before start()")
        inner = self._inner
        if inner.instance is not None:
            return
        if inner.message_model == MessageModel.CLUSTERING:
            # Java's copySubscription: failed messages come back through the group's retry topic.
            self.subscriptions.setdefault(retry_topic(self.group), build_subscription(retry_topic(self.group), SUB_ALL))
        inner.consume_orderly = self._orderly is not None
        inner.consume_thread_count = self.consume_concurrency
        await inner.start()
        if self._orderly is not None:
            inner.tasks.append(asyncio.get_running_loop().create_task(self._lock_loop()))

    async def shutdown(self) -> None:
        inner = self._inner
        if inner.instance is None:
            return
        # Stop pulling, let the listener calls under way finish (bounded), then commit.
        self._stopping = True
        deadline = inner.shutdown_deadline()  # one bound for every step, brokers up or not
        if self._consuming:
            _, stuck = await asyncio.wait(set(self._consuming), timeout=max(deadline - time.monotonic(), 0.01))
            for task in stuck:
                task.cancel()
            if stuck:
                log.warning("%d listener calls of %s still running after %.0f s were cancelled", len(stuck),
                            self.group, inner.shutdown_timeout)
        if self._orderly is not None and inner.rebalance is not None:
            try:
                await asyncio.wait_for(inner.rebalance.unlock(list(self._locks)),
                                       max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                log.warning("unlock of %s's queues cut short by its shutdown timeout", self.group)
        await inner.shutdown()
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
            self._inner_producer = None
        self._stopping = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def commit(self) -> None:
        await self._inner.commit()

    def committed_offsets(self) -> dict[MessageQueue, int]:
        return self._inner.committed_offsets()

    # -- rebalancing and orderly locks (docs/behaviours.md#orderly-consumption-locks) ----------------------

    async def rebalance(self) -> None:
        """Rebalance now, as on NOTIFY_CONSUMER_IDS_CHANGED; an orderly consumer then locks its queues."""
        await self._inner.require_rebalance().do_rebalance()

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._inner.process_queue_table)

    async def lock_all(self) -> None:
        if self._inner.instance is not None and self._inner.rebalance is not None:
            await self._inner.rebalance.lock_all()

    async def _lock_loop(self) -> None:
        while True:
            await asyncio.sleep(LOCK_INTERVAL)
            await self.lock_all()

    # -- pulling ----------------------------------------------------------------------------

    def _flow_control_delay(self, pq: ProcessQueue) -> float:
        """Seconds to wait before this queue's next pull (0: pull now), counting what it caches."""
        if self._stopping:
            return 1.0
        if not pq.msgs:
            return 0.0
        count_limit, size_limit = self._queue_limits(pq.mq.topic)
        if pq.count > count_limit or pq.size > size_limit * 1024 * 1024:
            self.queue_flow_control_times += 1
            if self.queue_flow_control_times % 1000 == 1:
                log.warning("the cached message count exceeds the threshold %d, or its size exceeds %d MiB, so "
                            "do flow control, minOffset=%d, maxOffset=%d, count=%d, size=%d MiB, pullRequest=%s, "
                            "flowControlTimes=%d", count_limit, size_limit, next(iter(pq.msgs)), pq.max_offset,
                            pq.count, pq.size // (1024 * 1024), pq.mq, self.queue_flow_control_times)
            return PULL_TIME_DELAY_WHEN_FLOW_CONTROL
        if self._orderly is None and pq.span > self.consume_concurrently_max_span:
            self.queue_max_span_flow_control_times += 1
            if self.queue_max_span_flow_control_times % 1000 == 1:
                log.warning("the queue's messages, span too long, so do flow control, minOffset=%d, maxOffset=%d, "
                            "maxSpan=%d, pullRequest=%s, flowControlTimes=%d", next(iter(pq.msgs)),
                            pq.max_offset, pq.span, pq.mq, self.queue_max_span_flow_control_times)
            return PULL_TIME_DELAY_WHEN_FLOW_CONTROL
        return 0.0

    def _queue_limits(self, topic: str) -> tuple[int, int]:
        """Per-queue count and MiB limits; a topic-wide limit is shared by the topic's queues."""
        count, size = self.pull_threshold_for_queue, self.pull_threshold_size_for_queue
        queues = sum(1 for mq in self._inner.process_queue_table if mq.topic == topic) or 1
        if self.pull_threshold_for_topic != -1:
            count = max(1, self.pull_threshold_for_topic // queues)
        if self.pull_threshold_size_for_topic != -1:
            size = max(1, self.pull_threshold_size_for_topic // queues)
        return count, size

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if pq.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            for msg in msgs:  # Java's resetRetryAndNamespace: the listener sees the original topic
                msg.topic = msg.properties.get(MessageConst.RETRY_TOPIC) or msg.topic
        if self._orderly is not None:
            # One batch of a queue at a time, in order: the next pull waits for it.
            await self._consume_orderly(pq, msgs)
            pq.consumed_offset = msgs[-1].queue_offset + 1
            return
        # Concurrently: the batch joins the queue's ProcessQueue and the pull loop goes on
        # (flow control holds it back); the offset moves as the lowest pending message is done.
        pq.put(msgs)
        loop = asyncio.get_running_loop()
        for msg in msgs:
            task = loop.create_task(self._consume_and_ack(pq, msg))
            self._consuming.add(task)
            task.add_done_callback(self._consuming.discard)

    async def _consume_and_ack(self, pq: ProcessQueue, msg: MessageExt) -> None:
        await self._consume_one(pq.mq, msg)
        offset = pq.remove(msg)
        if self._inner.process_queue_table.get(pq.mq) is pq:  # not a queue rebalanced away meanwhile
            pq.consumed_offset = max(pq.consumed_offset, offset)

    async def _consume_one(self, mq: MessageQueue, msg: MessageExt) -> None:
        assert self._listener is not None
        while True:
            async with self._slots:
                trace = self._inner.trace
                before = consume_message_before(trace, self.group, [msg]) if trace is not None else None
                return_type = ConsumeReturnType.SUCCESS
                try:
                    status = await self._listener([msg])
                except Exception:
                    log.exception("consumeMessage exception, group %s msg %s", self.group, msg.msg_id)
                    status, return_type = ConsumeConcurrentlyStatus.RECONSUME_LATER, ConsumeReturnType.EXCEPTION
                if before is not None:
                    self._trace_consumed(before, status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS, status,
                                         return_type)
            if status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
                return
            if self._inner.message_model == MessageModel.BROADCASTING:
                log.warning("BROADCASTING, the message %s consume failed, drop it", msg.msg_id)
                return
            if await self.send_message_back(mq, msg, 0) or await self._resend_to_retry_topic(msg):
                return
            # Neither way back to the broker worked: consume it again here, later (Java's last resort).
            msg.reconsume_times += 1
            log.info("message %s could not be sent back; retrying locally in %.1fs (reconsumeTimes=%d)",
                     msg.msg_id, self.local_retry_delay, msg.reconsume_times)
            await asyncio.sleep(self.local_retry_delay)

    def _trace_consumed(self, before: TraceContext, success: bool, status: object,
                        return_type: ConsumeReturnType) -> None:
        """SubAfter, with Java's return type: RETURNNULL for None, FAILED for a failure status."""
        assert self._inner.trace is not None
        if return_type is ConsumeReturnType.SUCCESS and not success:
            return_type = ConsumeReturnType.RETURNNULL if status is None else ConsumeReturnType.FAILED
        consume_message_after(self._inner.trace, before, 1, success, return_type)

    async def send_message_back(self, mq: MessageQueue, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the broker the message came from; False when it failed.

        ``delay_level`` 0 lets the broker pick ``3 + reconsumeTimes``; -1 sends it to the DLQ.
        """
        instance = self._inner.instance
        if instance is None:
            return False
        header = {"offset": str(msg.commit_log_offset), "group": self.group, "delayLevel": str(delay_level),
                  "originMsgId": msg.msg_id, "originTopic": msg.topic, "unitMode": "false",
                  "maxReconsumeTimes": str(self.effective_max_reconsume_times), "bname": mq.broker_name}
        try:
            addr = await instance.master_addr(mq.topic, mq.broker_name)
            r = await instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                                             header), SEND_BACK_TIMEOUT)
        except (MQClientError, RemotingError) as exc:
            log.warning("send message back %s to %s failed: %s", msg.msg_id, mq.broker_name, exc)
            return False
        if r.code != ResponseCode.SUCCESS:
            log.warning("send message back %s refused: %s %s", msg.msg_id, r.code, r.remark)
            return False
        return True

    async def _resend_to_retry_topic(self, msg: MessageExt) -> bool:
        """Java's fallback when CONSUMER_SEND_MSG_BACK fails: send a copy to the retry topic
        through the client's inner producer, delayed for level ``3 + reconsumeTimes``."""
        props = dict(msg.properties)
        props.pop(MessageConst.TRANSACTION_PREPARED, None)
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = msg.msg_id
        props[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[MessageConst.MAX_RECONSUME_TIMES] = str(self.effective_max_reconsume_times)
        props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
        copy = Message(retry_topic(self.group), msg.body, flag=msg.flag, properties=props,
                       delay_time_level=3 + msg.reconsume_times)
        try:
            if self._inner_producer is None:
                self._inner_producer = Producer(CLIENT_INNER_PRODUCER_GROUP, self.config.namesrv_addr,
                                                instance_name=self.config.instance_name)
                await self._inner_producer.start()
            await self._inner_producer._send(copy, None, None, None, None, False)
        except (MQClientError, RemotingError) as exc:
            log.warning("re-sending %s to %s failed: %s", msg.msg_id, copy.topic, exc)
            return False
        return True

    async def _consume_orderly(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self._orderly is not None
        rebalance = self._inner.rebalance
        assert rebalance is not None  # set by start, before the first pull
        # Only the lock holder consumes a queue: while another member still holds it (during a
        # rebalance), wait and retry the lock rather than consume out of turn.
        while not rebalance.holds_lock(pq.mq):
            await asyncio.sleep(self.suspend_current_queue_time)
            await self.lock_all()
        for msg in msgs:
            while True:
                trace = self._inner.trace
                before = consume_message_before(trace, self.group, [msg]) if trace is not None else None
                return_type = ConsumeReturnType.SUCCESS
                try:
                    status = await self._orderly([msg])
                except Exception:
                    log.exception("consumeMessage exception, group %s msg %s", self.group, msg.msg_id)
                    status, return_type = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, \
                        ConsumeReturnType.EXCEPTION
                if before is not None:
                    self._trace_consumed(before, status == ConsumeOrderlyStatus.SUCCESS, status, return_type)
                if status == ConsumeOrderlyStatus.SUCCESS:
                    break
                if msg.reconsume_times >= self.effective_max_reconsume_times and \
                        await self.send_message_back(pq.mq, msg, -1):
                    log.warning("message %s failed %d times in order; moved to the DLQ of %s", msg.msg_id,
                                msg.reconsume_times + 1, self.group)
                    break
                msg.reconsume_times += 1
                # The queue is suspended in place: later messages wait, so order holds.
                await asyncio.sleep(self.suspend_current_queue_time)
            pq.consumed_offset = msg.queue_offset + 1
