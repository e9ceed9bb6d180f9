"""LitePullConsumer: RocketMQ's DefaultLitePullConsumer on asyncio.

Either ``subscribe`` (queues split among the group's members by rebalancing every 20 s and at
once on NOTIFY_CONSUMER_IDS_CHANGED) or ``assign`` (a fixed set). One background task per queue
long-polls the broker and fills a bounded buffer; ``poll`` hands out one pulled batch at a time.
Offsets are committed by ``commit()`` or, with auto-commit, every 5 s and at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
    MessageQueue,
    strategy_from,
)
from rocketmq_py.client.errors import ClientStateError, MQBrokerError, MQClientError, NoRouteError
from rocketmq_py.client.instance import ClientConfig, MQClientInstance, MQClientManager
from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.client.offset_store import LocalFileOffsetStore
from rocketmq_py.client.running_info import (
    CLIENT_VERSION_DESC,
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    encode_running_info,
    process_queue_info,
)
from rocketmq_py.client.trace.async_trace_dispatcher import AsyncTraceDispatcher
from rocketmq_py.client.trace.trace_context import ConsumeReturnType
from rocketmq_py.client.trace.trace_hooks import consume_message_after, consume_message_before
from rocketmq_py.client.validators import check_group
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.broker import (
    FLAG_COMMIT_OFFSET,
    FLAG_LITE_PULL,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketmq_py.remoting.protocol.heartbeat import (
    SUB_ALL,
    CheckClientRequestBody,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerIdList,
    ConsumeType,
    ExpressionType,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocketmq_py.remoting.protocol.message import (
    MessageConst,
    MessageExt,
    RecordError,
    decode_records,
    java_string_hash,
)
from rocketmq_py.remoting.protocol.route import MASTER_ID
from rocketmq_py.remoting.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, PermName

log = logging.getLogger("rocketmq.client")


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.01)


def build_subscription(topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
    """FilterAPI.build: tags split on ``||``, their Java hashes as the code set; SQL92 kept as text
    (the broker compiles it; no tag set, so the client filters nothing itself)."""
    if isinstance(expression, MessageSelector):
        if expression.expression_type == ExpressionType.SQL92:
            return SubscriptionData(topic=topic, subString=expression.expression,
                                    expressionType=ExpressionType.SQL92, subVersion=int(time.time() * 1000))
        if expression.expression_type != ExpressionType.TAG:
            raise ValueError(f"unknown expression type {expression.expression_type!r}")
        expression = expression.expression
    expression = (expression or "").strip()
    sub = SubscriptionData(topic=topic, subString=SUB_ALL if expression in ("", SUB_ALL) else expression,
                           subVersion=int(time.time() * 1000))
    if sub.subString != SUB_ALL:
        tags = [t.strip() for t in expression.split("||") if t.strip()]
        if not tags:
            raise ValueError(f"invalid tag expression: {expression!r}")
        sub.tagsSet = tags
        sub.codeSet = [java_string_hash(t) for t in tags]
    return sub


# How soon a rebalance looks again for a subscribed topic that had no route.
UNROUTED_REBALANCE_INTERVAL = 1.0


@dataclass
class _QueueState:
    mq: MessageQueue
    next_offset: int = -1
    consumed_offset: int = -1
    paused: bool = False
    task: asyncio.Task[None] | None = None
    # The broker id the last pull answer suggested (suggestWhichBrokerId): Java's
    # pullFromWhichNodeTable, so a master can send a slow consumer to its slave.
    pull_from_broker_id: int = MASTER_ID
    # A push consumer's pulled-but-unconsumed messages of this queue (its ProcessQueue).
    process: Any = None


@dataclass
class _Batch:
    mq: MessageQueue
    messages: list[MessageExt] = field(default_factory=list)
    # The queue state that pulled it: a seek or a rebalance replaces the state, which makes
    # every batch pulled before it stale, whichever way the offset moved.
    state: _QueueState | None = None


def _decode_pulled(body: bytes, mq: MessageQueue, offset: int) -> list[MessageExt]:
    """The records of a pull response up to the first one that does not decode.

    As in Java's ``MessageDecoder.decodes``, an undecodable record (say a flagged body that does
    not inflate) ends the batch instead of stopping the queue: it can never decode on a retry.
    """
    msgs: list[MessageExt] = []
    try:
        msgs.extend(decode_records(body, decompress=True))
    except RecordError as exc:
        log.error("undecodable record in %s after offset %d (%d decoded): %s", mq, offset, len(msgs), exc)
    return msgs


class LitePullConsumer:
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
        self.group = group
        self.config = ClientConfig(namesrv_addr=namesrv_addr, instance_name=instance_name,
                                   session_credentials=session_credentials, use_tls=use_tls)
        self.pull_batch_size = pull_batch_size
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval
        self.consume_from_where = consume_from_where
        # Java's default: half an hour before the consumer was created.
        self.consume_timestamp = consume_timestamp if consume_timestamp is not None else int(
            (time.time() - 1800) * 1000)
        self.message_model = message_model
        self._local_offsets: LocalFileOffsetStore | None = None
        self.broker_suspend_max_time = broker_suspend_max_time
        self.rebalance_interval = rebalance_interval
        # How long shutdown waits for its pulling and rebalancing tasks to stop.
        self.shutdown_timeout = 5.0
        self._deadline: float | None = None
        self.strategy = strategy_from(allocate_strategy) if allocate_strategy else AllocateMessageQueueAveragely()
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._assigned_fixed: list[MessageQueue] | None = None
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._buffer: asyncio.Queue[_Batch] = asyncio.Queue(maxsize=max(1, pull_threshold_for_all // pull_batch_size))
        self._instance: MQClientInstance | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        # Message trace (client/trace/), as Java's consumers' (group, enableMsgTrace,
        # customizedTraceTopic): a polled batch gets SubBefore and SubAfter when pulled, as
        # DefaultLitePullConsumerImpl writes them; a push consumer around each listener call.
        self._trace: AsyncTraceDispatcher | None = None
        if enable_msg_trace or custom_trace_topic:
            self._trace = AsyncTraceDispatcher(group, "CONSUMER", custom_trace_topic, session_credentials, use_tls)
        self._unrouted = False
        self.start_timestamp = 0

    # -- setup ------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = SUB_ALL) -> None:
        """A tag expression (``"A || B"``, ``*``) or a MessageSelector (``MessageSelector.by_sql``)."""
        self.subscriptions[topic] = build_subscription(topic, expression)

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalancing); may be called again while running."""
        self._assigned_fixed = list(queues)
        for mq in queues:
            self.subscriptions.setdefault(mq.topic, build_subscription(mq.topic, SUB_ALL))
        if self._instance is not None:
            self._apply_assignment(self._assigned_fixed)

    async def start(self) -> None:
        if self._instance is not None:
            return
        check_group(self.group)  # Java's checkConfig: Validators.checkGroup
        self._instance = instance = await MQClientManager.acquire(self.config)
        if self._trace is not None:
            await self._trace.start(self.config.namesrv_addr)
        self.start_timestamp = int(time.time() * 1000)
        if self.message_model == MessageModel.BROADCASTING:
            self._local_offsets = LocalFileOffsetStore(instance.client_id, self.group)
            self._local_offsets.load()
        instance.members[f"consumer:{self.group}"] = self
        instance.consumer_listeners.setdefault(self.group, []).append(self._rebalance_now.set)
        for topic in self.subscriptions:
            try:
                await instance.update_topic_route(topic)
            except NoRouteError as exc:
                # Java logs this and rebalances later: the topic may be created after us.
                log.warning("subscribed topic has no route yet: %s", exc)
        try:
            await self._check_client_in_broker(instance)
        except MQClientError:
            await self.shutdown()
            raise
        await instance.send_heartbeat_to_all_brokers()
        loop = asyncio.get_running_loop()
        if self._assigned_fixed is not None:
            self._apply_assignment(self._assigned_fixed)
        else:
            await self.rebalance()
            self._tasks.append(loop.create_task(self._rebalance_loop()))
        if self.auto_commit:
            self._tasks.append(loop.create_task(self._auto_commit_loop()))

    async def _check_client_in_broker(self, instance: MQClientInstance) -> None:
        """MQClientInstance.checkClientInBroker: each non-TAG subscription is compiled by the
        masters serving its topic, so a bad selector or a broker without property filtering
        fails start() with the broker's reason instead of pulls failing later."""
        for sub in self.subscriptions.values():
            if sub.expressionType == ExpressionType.TAG:
                continue
            route = instance.topic_route_table.get(sub.topic)
            for bd in route.brokerDatas if route else []:
                addr = bd.brokerAddrs.get(MASTER_ID)
                if addr is None:
                    continue
                body = CheckClientRequestBody(clientId=instance.client_id, group=self.group, subscriptionData=sub)
                try:
                    r = await instance.remoting.invoke(
                        addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, body.encode()),
                        instance.config.mq_client_api_timeout)
                except RemotingError as exc:
                    raise MQClientError(f"Check client in broker {addr} error, maybe because you use "
                                        f"{sub.expressionType} to filter message: {exc}") from exc
                if r.code != ResponseCode.SUCCESS:
                    raise MQBrokerError(r.code, r.remark, addr)

    async def shutdown(self) -> None:
        """Stop pulling, commit, unregister: all within ``shutdown_timeout``, brokers up or not."""
        deadline = self._shutdown_deadline()
        instance, self._instance = self._instance, None
        if instance is None:
            return
        running = [*self._tasks, *(s.task for s in self._queues.values() if s.task)]
        for task in running:
            task.cancel()
        self._rebalance_now.set()
        if running:
            _, stuck = await asyncio.wait(running, timeout=_left(deadline))
            if stuck:
                log.warning("%d tasks of consumer %s did not stop within %.0f s", len(stuck), self.group,
                            self.shutdown_timeout)
        self._tasks = []
        if self.auto_commit:
            await self._commit(instance, timeout=_left(deadline))
        instance.members.pop(f"consumer:{self.group}", None)
        listeners = instance.consumer_listeners.get(self.group, [])
        with contextlib.suppress(ValueError):
            listeners.remove(self._rebalance_now.set)
        try:
            await asyncio.wait_for(instance.unregister(consumer_group=self.group), _left(deadline))
        except TimeoutError:
            log.warning("unregister of consumer %s cut short by its shutdown timeout", self.group)
        await MQClientManager.release(instance)
        if self._trace is not None:
            await self._trace.shutdown()
        self._deadline = None

    def _shutdown_deadline(self) -> float:
        """One deadline for the whole shutdown, however many steps (and subclasses) share it."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.shutdown_timeout
        return self._deadline

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def heartbeat_data(self) -> tuple[list[ProducerData], list[ConsumerData]]:
        return [], [ConsumerData(groupName=self.group, consumeType=ConsumeType.CONSUME_ACTIVELY,
                                 messageModel=self.message_model, consumeFromWhere=self.consume_from_where,
                                 subscriptionDataSet=list(self.subscriptions.values()))]

    def topics(self) -> set[str]:
        return set(self.subscriptions)

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._queues)

    # -- consuming --------------------------------------------------------------------------

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """The next pulled batch, or [] after ``timeout`` seconds with nothing to give."""
        self._require_started()
        deadline = time.monotonic() + timeout
        while True:
            if not self._buffer.empty():  # a consumer behind its pulls: no timer to set up
                batch = self._buffer.get_nowait()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                try:
                    # A deadline on this task, not wait_for's task around get(): two loop turns
                    # fewer between a pull's answer and the caller.
                    async with asyncio.timeout(remaining):
                        batch = await self._buffer.get()
                except TimeoutError:
                    return []
            state = self._queues.get(batch.mq)
            if state is None or state is not batch.state or state.paused or not batch.messages:
                continue  # the queue was reassigned or sought since this batch was pulled
            state.consumed_offset = batch.messages[-1].queue_offset + 1
            return batch.messages

    async def commit(self) -> None:
        await self._commit(self._require_started())

    def committed_offsets(self) -> dict[MessageQueue, int]:
        return {mq: s.consumed_offset for mq, s in self._queues.items() if s.consumed_offset >= 0}

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` next, dropping what was pulled before. As Java's
        seek: the queue must be assigned, and the offset within the queue's min and max
        offsets, which are asked of the broker."""
        if mq not in self._queues:
            raise MQClientError(f"The message queue is not in assigned list, may be rebalancing, {mq}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise MQClientError(f"Seek offset illegal, seek offset = {offset!r} is not an int")
        low = await self._offset_request(RequestCode.GET_MIN_OFFSET, mq)
        high = await self._offset_request(RequestCode.GET_MAX_OFFSET, mq)
        if not low <= offset <= high:
            raise MQClientError(f"Seek offset illegal, seek offset = {offset}, min offset = {low}, "
                                f"max offset = {high}")
        self._seek(mq, offset)

    def _seek(self, mq: MessageQueue, offset: int) -> None:
        state = self._queues.get(mq)
        if state is None:
            raise MQClientError(f"The message queue is not in assigned list, may be rebalancing, {mq}")
        if state.task:
            state.task.cancel()
        # A fresh state: what the old one pulled, or is still consuming, no longer counts.
        fresh = self._queues[mq] = _QueueState(mq, next_offset=offset, consumed_offset=offset, paused=state.paused)
        fresh.task = asyncio.get_running_loop().create_task(self._pull_loop(fresh))

    def reset_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from the broker (an operator's reset by time): the
        queues we consume start again from the given offsets, dropping what was pulled."""
        for mq, offset in offsets.items():
            if mq in self._queues:
                log.info("reset offset of %s to %d (group %s)", mq, offset, self.group)
                self._seek(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        self._seek(mq, await self._offset_request(RequestCode.GET_MIN_OFFSET, mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        self._seek(mq, await self._offset_request(RequestCode.GET_MAX_OFFSET, mq))

    def pause(self, queues: Sequence[MessageQueue]) -> None:
        for mq in queues:
            if mq in self._queues:
                self._queues[mq].paused = True

    def resume(self, queues: Sequence[MessageQueue]) -> None:
        for mq in queues:
            if mq in self._queues:
                self._queues[mq].paused = False

    # -- requests from the broker (forwarded for mqadmin) -----------------------------------

    def consumer_running_info(self) -> bytes:
        """The ConsumerRunningInfo body answering GET_CONSUMER_RUNNING_INFO."""
        instance = self._require_started()
        props = {
            "consumerGroup": self.group, "messageModel": str(self.message_model),
            "consumeFromWhere": str(self.consume_from_where), "pullBatchSize": str(self.pull_batch_size),
            "autoCommit": str(self.auto_commit).lower(), "allocateMessageQueueStrategy": self.strategy.name,
            PROP_NAMESERVER_ADDR: instance.config.namesrv_addr or "",
            PROP_CONSUME_TYPE: str(self.heartbeat_data()[1][0].consumeType),
            PROP_CONSUME_ORDERLY: str(self._is_orderly()).lower(),
            PROP_THREADPOOL_CORE_SIZE: str(self._threadpool_core_size()),
            PROP_CLIENT_VERSION: CLIENT_VERSION_DESC,
            PROP_CONSUMER_START_TIMESTAMP: str(self.start_timestamp),
        }
        table = {mq: self._queue_info(state) for mq, state in self._queues.items()}
        return encode_running_info(props, [s.encode() for s in self.subscriptions.values()], table,
                                   list(self.subscriptions))

    def _is_orderly(self) -> bool:
        return False

    def _threadpool_core_size(self) -> int:
        return 1  # poll() hands batches to the caller's own task

    def _queue_info(self, state: _QueueState) -> dict[str, object]:
        return process_queue_info(max(state.consumed_offset, 0))

    # -- internals --------------------------------------------------------------------------

    def _require_started(self) -> MQClientInstance:
        if self._instance is None:
            raise ClientStateError("The consumer is not started: call start() first")
        return self._instance

    def _apply_assignment(self, wanted: Sequence[MessageQueue]) -> list[_QueueState]:
        """Start pulling new queues and stop removed ones; returns the removed queues' states."""
        removed = [self._queues.pop(mq) for mq in list(self._queues) if mq not in wanted]
        for state in removed:
            if state.task:
                state.task.cancel()
        loop = asyncio.get_running_loop()
        for mq in wanted:
            if mq not in self._queues:
                state = self._queues[mq] = _QueueState(mq)
                state.task = loop.create_task(self._pull_loop(state))
        return removed

    async def rebalance(self) -> None:
        instance = self._require_started()
        if self._assigned_fixed is not None:
            return  # assign() fixes the queues, also when called after start (Java's ASSIGN mode)
        wanted: list[MessageQueue] = []
        self._unrouted = False
        for topic in self.subscriptions:
            allocated = await self._allocate_topic(instance, topic)
            if allocated is None:
                # Java's rebalanceByTopic: with no queue set or no consumer ids it logs and changes
                # nothing, so an unreachable NameServer or broker never empties an assignment.
                allocated = [mq for mq in self._queues if mq.topic == topic]
            wanted.extend(allocated)
        removed = self._apply_assignment(wanted)
        if removed and self.auto_commit:
            await self._commit(instance, removed)

    async def _allocate_topic(self, instance: MQClientInstance, topic: str) -> list[MessageQueue] | None:
        """This member's queues of ``topic``, or None when that cannot be known right now."""
        try:
            route = await instance.update_topic_route(topic)
        except (NoRouteError, RemotingError) as exc:
            cached = instance.topic_route_table.get(topic)  # the cached route, as Java's table
            log.warning("rebalance: %s%s", exc, "; using the cached route" if cached else "")
            if cached is None:
                self._unrouted = True
                return None
            route = cached
        mq_all = sorted(MessageQueue(topic, qd.brokerName, q) for qd in route.queueDatas
                        if PermName.is_readable(qd.perm) for q in range(qd.readQueueNums))
        if not mq_all:
            return None
        if self.message_model == MessageModel.BROADCASTING:
            return mq_all  # every member consumes every queue
        cids = await self._consumer_ids(instance, topic)
        if instance.client_id not in cids:
            # The broker has not heard from us yet (the route, and so the broker, was unknown
            # at start): heartbeat now, as Java does on a new route, and ask again.
            await instance.send_heartbeat_to_all_brokers()
            cids = await self._consumer_ids(instance, topic)
        if not cids:
            log.warning("doRebalance, %s, %s, get consumer id list failed; assignment unchanged", self.group, topic)
            return None
        return self.strategy.allocate(self.group, instance.client_id, mq_all, sorted(cids))

    async def _consumer_ids(self, instance: MQClientInstance, topic: str) -> list[str]:
        route = instance.topic_route_table.get(topic)
        for bd in route.brokerDatas if route else []:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            try:
                r = await instance.remoting.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}),
                    instance.config.mq_client_api_timeout)
            except RemotingError:
                continue
            if r.code == ResponseCode.SUCCESS and r.body:
                return ConsumerIdList.decode(r.body).consumerIdList
        return []

    async def _rebalance_loop(self) -> None:
        # Ends on shutdown by itself: on Python 3.11 wait_for may swallow a cancellation that
        # arrives as the event is set, and a loop that relied on it would never end.
        while self._instance is not None:
            # A subscribed topic with no route yet (a retry topic the first heartbeat just
            # created, a topic about to be made) is looked for again within a second, not 20.
            wait = min(self.rebalance_interval, UNROUTED_REBALANCE_INTERVAL) if self._unrouted else \
                self.rebalance_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance_now.wait(), wait)
            self._rebalance_now.clear()
            if self._instance is None:
                return
            try:
                await self.rebalance()
            except (MQClientError, RemotingError) as exc:
                log.warning("rebalance of %s failed: %s", self.group, exc)

    async def _auto_commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.auto_commit_interval)
            if self._instance is not None:
                await self._commit(self._instance)

    async def _commit(self, instance: MQClientInstance, states: Sequence[_QueueState] | None = None,
                      timeout: float | None = None) -> None:
        chosen = list(self._queues.values()) if states is None else states
        if self._local_offsets is not None:
            for state in chosen:
                if state.consumed_offset >= 0:
                    self._local_offsets.update(state.mq, state.consumed_offset)
            await asyncio.to_thread(self._local_offsets.persist)
            return
        wait = min(instance.config.mq_client_api_timeout, timeout or instance.config.mq_client_api_timeout)

        async def one(state: _QueueState) -> None:
            mq = state.mq
            addr = instance.find_broker_address_in_admin(mq.broker_name)
            if addr is None:
                return
            try:
                await instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": self.group, "topic": mq.topic, "queueId": str(mq.queue_id),
                    "commitOffset": str(state.consumed_offset)}), wait)
            except RemotingError as exc:
                log.warning("commit offset of %s failed: %s", mq, exc)

        # In parallel: a hung broker costs one timeout, not one per queue.
        await asyncio.gather(*(one(s) for s in chosen if s.consumed_offset >= 0))

    async def _offset_request(self, code: int, mq: MessageQueue, extra: dict[str, str] | None = None) -> int:
        instance = self._require_started()
        # The master, else a slave while the master is gone (offsets and bounds are read there).
        addr = instance.find_broker_address_in_admin(mq.broker_name) or await instance.master_addr(
            mq.topic, mq.broker_name)
        header = {"topic": mq.topic, "queueId": str(mq.queue_id), **(extra or {})}
        r = await instance.remoting.invoke(addr, RemotingCommand.request(code, header),
                                           instance.config.mq_client_api_timeout)
        if r.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if r.code != ResponseCode.SUCCESS:
            raise MQClientError(f"offset request {code} for {mq} failed: {r.remark}", r.code, r.remark)
        return int((r.ext_fields or {})["offset"])

    def _flow_control_delay(self, state: _QueueState) -> float:
        """Seconds to wait before this queue's next pull (0: pull now). The lite consumer is
        held back by its bounded buffer instead; a push consumer counts what it has cached."""
        return 0.0

    async def _deliver(self, state: _QueueState, msgs: list[MessageExt]) -> None:
        """Hand a pulled batch on: to ``poll`` here; a push consumer feeds its listener instead."""
        trace = self._trace
        if trace is not None:
            before = consume_message_before(trace, self.group, msgs)
            if before is not None:
                consume_message_after(trace, before, len(msgs), True, ConsumeReturnType.SUCCESS)
        await self._buffer.put(_Batch(state.mq, msgs, state))

    async def _start_offset(self, mq: MessageQueue) -> int:
        """The committed offset, else where consumeFromWhere says (docs/behaviours.md#consumer-defaults)."""
        if self._local_offsets is not None:
            committed = self._local_offsets.read(mq)
        else:
            # From a timestamp means from that time even on a young queue: ask the broker (5.x's
            # setZeroIfNotFound) not to answer 0 for a group it has no offset for.
            extra = {"consumerGroup": self.group}
            if self.consume_from_where == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
                extra["setZeroIfNotFound"] = "false"
            committed = await self._offset_request(RequestCode.QUERY_CONSUMER_OFFSET, mq, extra)
        if committed >= 0:
            return committed
        if self.consume_from_where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if (self.consume_from_where == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
                and not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)):
            return await self._offset_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq,
                                              {"timestamp": str(self.consume_timestamp)})
        return await self._offset_request(RequestCode.GET_MAX_OFFSET, mq)

    async def _pull_loop(self, state: _QueueState) -> None:
        mq = state.mq
        sub = self.subscriptions[mq.topic]
        while True:
            try:
                if state.next_offset < 0:
                    state.next_offset = await self._start_offset(mq)
                if state.paused:
                    await asyncio.sleep(1.0)  # Java's pull delay while paused
                    continue
                delay = self._flow_control_delay(state)
                if delay:
                    await asyncio.sleep(delay)
                    continue
                instance = self._require_started()
                addr, slave = await instance.subscribe_addr(mq.topic, mq.broker_name, state.pull_from_broker_id)
                header = PullMessageRequestHeader(
                    consumerGroup=self.group, topic=mq.topic, queueId=mq.queue_id, queueOffset=state.next_offset,
                    maxMsgNums=self.pull_batch_size, commitOffset=max(state.consumed_offset, 0),
                    # A slave keeps no offsets a pull commits (Java clears the flag for it).
                    sysFlag=FLAG_SUSPEND | FLAG_SUBSCRIPTION | FLAG_LITE_PULL | (
                        FLAG_COMMIT_OFFSET if state.consumed_offset > 0 and not slave else 0),
                    suspendTimeoutMillis=int(self.broker_suspend_max_time * 1000), subVersion=sub.subVersion,
                    subscription=sub.subString, expressionType=sub.expressionType)
                r = await instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header),
                                                   self.broker_suspend_max_time + 10)
                ext = r.ext_fields or {}
                suggested = ext.get("suggestWhichBrokerId")
                if suggested is not None and suggested.lstrip("-").isdigit():
                    state.pull_from_broker_id = int(suggested)
                if r.code == ResponseCode.SUCCESS:
                    msgs = _decode_pulled(r.body or b"", mq, state.next_offset)
                    if sub.tagsSet:
                        msgs = [m for m in msgs if m.properties.get(MessageConst.TAGS) in sub.tagsSet]
                    state.next_offset = int(ext["nextBeginOffset"])
                    if msgs:
                        await self._deliver(state, msgs)
                elif r.code in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
                    state.next_offset = int(ext.get("nextBeginOffset", state.next_offset))
                elif r.code != ResponseCode.PULL_NOT_FOUND:
                    raise MQClientError(f"pull {mq} failed: {r.code} {r.remark}", r.code, r.remark)
            except asyncio.CancelledError:
                raise
            except (MQClientError, RemotingError) as exc:
                log.warning("pull of %s failed: %s; retrying in 1 s", mq, exc)
                await asyncio.sleep(1.0)  # pullTimeDelayMillsWhenException
