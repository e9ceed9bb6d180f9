"""MQConsumerInner: a consumer as its client instance drives it, wired from the shared parts.

Java's MQConsumerInner is what MQClientInstance keeps per consumer group (heartbeat data,
running info, offset resets, rebalancing); DefaultLitePullConsumerImpl and
DefaultMQPushConsumerImpl each implement it, and each repeats the start and shutdown order.
Here one class does it for both consumers, which hold one each: a consumer's settings, its
registration with the instance, the order of start and shutdown, and the parts it wires at
start -- RebalanceImpl with its RebalanceService, PullMessageService over a PullAPIWrapper, and
the OffsetStore (the broker's, or a local file for broadcasting). A consumer says where a pulled
batch goes (``deliver``) and whether a queue waits before its next pull (``flow_control``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
    MessageQueue,
    strategy_from,
)
from rocketmq_py.client.errors import ClientStateError, MQClientError, NoRouteError
from rocketmq_py.client.filter_api import build_subscription
from rocketmq_py.client.instance import ClientConfig, MQClientInstance, MQClientManager
from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from rocketmq_py.client.process_queue import ProcessQueue
from rocketmq_py.client.pull_api_wrapper import PullAPIWrapper
from rocketmq_py.client.pull_message_service import Deliver, FlowControl, PullMessageService
from rocketmq_py.client.rebalance_impl import RebalanceImpl
from rocketmq_py.client.rebalance_service import RebalanceService
from rocketmq_py.client.running_info import (
    CLIENT_VERSION_DESC,
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    encode_running_info,
)
from rocketmq_py.client.trace.async_trace_dispatcher import AsyncTraceDispatcher
from rocketmq_py.client.validators import check_group
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.protocol.heartbeat import (
    SUB_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    ProducerData,
    SubscriptionData,
)

log = logging.getLogger("rocketmq.client")


T = TypeVar("T")


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.01)


class InnerAttribute(Generic[T]):
    """A consumer's attribute kept by its MQConsumerInner (``_inner``), read and set through
    the consumer: ``consumer.shutdown_timeout = 2`` bounds the inner's shutdown."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, consumer: Any, owner: type | None = None) -> T:
        value: T = getattr(consumer._inner, self.name)
        return value

    def __set__(self, consumer: Any, value: T) -> None:
        setattr(consumer._inner, self.name, value)


class MQConsumerInner:
    def __init__(self, group: str, namesrv_addr: str | None, *, consume_type: ConsumeType, deliver: Deliver,
                 flow_control: FlowControl | None = None, instance_name: str = "DEFAULT",
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
        self.consume_type = consume_type
        self.deliver = deliver
        self.flow_control = flow_control
        self.pull_batch_size = pull_batch_size
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval
        self.consume_from_where = consume_from_where
        # Java's default: half an hour before the consumer was created.
        self.consume_timestamp = consume_timestamp if consume_timestamp is not None else int(
            (time.time() - 1800) * 1000)
        self.message_model = message_model
        self.pull_threshold_for_all = pull_threshold_for_all
        self.broker_suspend_max_time = broker_suspend_max_time
        self.rebalance_interval = rebalance_interval
        # How long shutdown waits for its pulling and rebalancing tasks to stop.
        self.shutdown_timeout = 5.0
        self.strategy = strategy_from(allocate_strategy) if allocate_strategy else AllocateMessageQueueAveragely()
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.assigned: list[MessageQueue] | None = None
        # Set by a push consumer before start: orderly queues are locked at their brokers, and
        # the running info reports its listener concurrency (poll() runs in the caller's task).
        self.consume_orderly = False
        self.consume_thread_count = 1
        # Message trace (client/trace/), as Java's consumers' (group, enableMsgTrace,
        # customizedTraceTopic).
        self.trace: AsyncTraceDispatcher | None = None
        if enable_msg_trace or custom_trace_topic:
            self.trace = AsyncTraceDispatcher(group, "CONSUMER", custom_trace_topic, session_credentials, use_tls)
        self.instance: MQClientInstance | None = None
        self.rebalance: RebalanceImpl | None = None
        self.rebalance_service: RebalanceService | None = None
        self.offset_store: OffsetStore | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.start_timestamp = 0
        self._deadline: float | None = None

    # -- setup ------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = SUB_ALL) -> None:
        self.subscriptions[topic] = build_subscription(topic, expression)

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        self.assigned = list(queues)
        for mq in queues:
            self.subscriptions.setdefault(mq.topic, build_subscription(mq.topic, SUB_ALL))
        if self.rebalance is not None:
            self.rebalance.assign(self.assigned)

    async def start(self) -> None:
        if self.instance is not None:
            return
        check_group(self.group)  # Java's checkConfig: Validators.checkGroup
        self.instance = instance = await MQClientManager.acquire(self.config)
        if self.trace is not None:
            await self.trace.start(self.config.namesrv_addr)
        self.start_timestamp = int(time.time() * 1000)
        self.offset_store = offset_store = self._make_offset_store(instance)
        pull_api = PullAPIWrapper(instance, self.group)
        pull_service = PullMessageService(pull_api, self.subscriptions, self._compute_pull_from_where, self.deliver,
                                          self.flow_control, self.pull_batch_size, self.broker_suspend_max_time)
        self.rebalance = rebalance = RebalanceImpl(
            instance, self.group, self.message_model, self.strategy, self.subscriptions, offset_store, pull_service,
            consume_from_where=self.consume_from_where, consume_timestamp=self.consume_timestamp,
            auto_commit=self.auto_commit, consume_orderly=self.consume_orderly, assigned=self.assigned)
        self.rebalance_service = RebalanceService(rebalance, self.rebalance_interval)
        instance.members[f"consumer:{self.group}"] = self
        instance.consumer_listeners.setdefault(self.group, []).append(self.rebalance_service.wakeup)
        for topic in self.subscriptions:
            try:
                await instance.update_topic_route(topic)
            except NoRouteError as exc:
                # Java logs this and rebalances later: the topic may be created after us.
                log.warning("subscribed topic has no route yet: %s", exc)
        try:
            await instance.check_client_in_broker(self.group, list(self.subscriptions.values()))
        except MQClientError:
            await self.shutdown()
            raise
        await instance.send_heartbeat_to_all_brokers()
        loop = asyncio.get_running_loop()
        if self.assigned is not None:
            rebalance.update_process_queue_table(self.assigned)
        else:
            await rebalance.do_rebalance()
            self.tasks.append(loop.create_task(self.rebalance_service.run()))
        if self.auto_commit:
            self.tasks.append(loop.create_task(self._auto_commit_loop()))

    def _make_offset_store(self, instance: MQClientInstance) -> OffsetStore:
        if self.message_model == MessageModel.BROADCASTING:
            local = LocalFileOffsetStore(instance.client_id, self.group)
            local.load()
            return local
        return RemoteBrokerOffsetStore(instance, self.group, set_zero_if_not_found=(
            self.consume_from_where != ConsumeFromWhere.CONSUME_FROM_TIMESTAMP))

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        assert self.rebalance is not None
        return await self.rebalance.compute_pull_from_where(mq)

    async def shutdown(self) -> None:
        """Stop pulling, commit, unregister: all within ``shutdown_timeout``, brokers up or not."""
        instance, self.instance = self.instance, None
        if instance is None:
            return
        deadline = self.shutdown_deadline()
        table = self.process_queue_table
        running = [*self.tasks, *(pq.task for pq in table.values() if pq.task)]
        for task in running:
            task.cancel()
        if self.rebalance_service is not None:
            self.rebalance_service.shutdown()
        if running:
            _, stuck = await asyncio.wait(running, timeout=_left(deadline))
            if stuck:
                log.warning("%d tasks of consumer %s did not stop within %.0f s", len(stuck), self.group,
                            self.shutdown_timeout)
        self.tasks = []
        if self.auto_commit and self.offset_store is not None:
            await self.offset_store.persist_all(list(table.values()), timeout=_left(deadline))
        instance.members.pop(f"consumer:{self.group}", None)
        listeners = instance.consumer_listeners.get(self.group, [])
        if self.rebalance_service is not None:
            with contextlib.suppress(ValueError):
                listeners.remove(self.rebalance_service.wakeup)
        try:
            await asyncio.wait_for(instance.unregister(consumer_group=self.group), _left(deadline))
        except TimeoutError:
            log.warning("unregister of consumer %s cut short by its shutdown timeout", self.group)
        await MQClientManager.release(instance)
        if self.trace is not None:
            await self.trace.shutdown()
        self._deadline = None

    def shutdown_deadline(self) -> float:
        """One deadline for the whole shutdown, however many steps (the consumer's and ours) share it."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.shutdown_timeout
        return self._deadline

    def require_started(self) -> MQClientInstance:
        if self.instance is None:
            raise ClientStateError("The consumer is not started: call start() first")
        return self.instance

    def require_rebalance(self) -> RebalanceImpl:
        self.require_started()
        assert self.rebalance is not None
        return self.rebalance

    @property
    def process_queue_table(self) -> dict[MessageQueue, ProcessQueue]:
        """The queues held now (none before the first start)."""
        return self.rebalance.process_queue_table if self.rebalance is not None else {}

    # -- what the client instance asks ------------------------------------------------------

    def heartbeat_data(self) -> tuple[list[ProducerData], list[ConsumerData]]:
        return [], [ConsumerData(groupName=self.group, consumeType=self.consume_type,
                                 messageModel=self.message_model, consumeFromWhere=self.consume_from_where,
                                 subscriptionDataSet=list(self.subscriptions.values()))]

    def topics(self) -> set[str]:
        return set(self.subscriptions)

    def consumer_running_info(self) -> bytes:
        """The ConsumerRunningInfo body answering GET_CONSUMER_RUNNING_INFO."""
        instance = self.require_started()
        props = {
            "consumerGroup": self.group, "messageModel": str(self.message_model),
            "consumeFromWhere": str(self.consume_from_where), "pullBatchSize": str(self.pull_batch_size),
            "autoCommit": str(self.auto_commit).lower(), "allocateMessageQueueStrategy": self.strategy.name,
            PROP_NAMESERVER_ADDR: instance.config.namesrv_addr or "",
            PROP_CONSUME_TYPE: str(self.consume_type),
            PROP_CONSUME_ORDERLY: str(self.consume_orderly).lower(),
            PROP_THREADPOOL_CORE_SIZE: str(self.consume_thread_count),
            PROP_CLIENT_VERSION: CLIENT_VERSION_DESC,
            PROP_CONSUMER_START_TIMESTAMP: str(self.start_timestamp),
        }
        locks = self.rebalance.lock_table if self.rebalance is not None else {}
        table = {mq: pq.info(mq in locks) for mq, pq in self.process_queue_table.items()}
        return encode_running_info(props, [s.encode() for s in self.subscriptions.values()], table,
                                   list(self.subscriptions))

    def committed_offsets(self) -> dict[MessageQueue, int]:
        return {mq: pq.consumed_offset for mq, pq in self.process_queue_table.items() if pq.consumed_offset >= 0}

    def reset_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from the broker (an operator's reset by time): the
        queues we consume start again from the given offsets, dropping what was pulled."""
        rebalance = self.rebalance
        for mq, offset in offsets.items():
            if rebalance is not None and mq in rebalance.process_queue_table:
                log.info("reset offset of %s to %d (group %s)", mq, offset, self.group)
                rebalance.seek(mq, offset)

    # -- offsets ----------------------------------------------------------------------------

    async def commit(self) -> None:
        self.require_started()
        assert self.offset_store is not None
        await self.offset_store.persist_all(list(self.process_queue_table.values()))

    async def _auto_commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.auto_commit_interval)
            if self.instance is not None:
                await self.commit()

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """As Java's seek: the queue must be assigned, and the offset within the queue's min and
        max offsets, which are asked of the broker."""
        if mq not in self.process_queue_table:
            raise MQClientError(f"The message queue is not in assigned list, may be rebalancing, {mq}")
        rebalance = self.require_rebalance()
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise MQClientError(f"Seek offset illegal, seek offset = {offset!r} is not an int")
        low = await rebalance.instance.offset_request(RequestCode.GET_MIN_OFFSET, mq)
        high = await rebalance.instance.offset_request(RequestCode.GET_MAX_OFFSET, mq)
        if not low <= offset <= high:
            raise MQClientError(f"Seek offset illegal, seek offset = {offset}, min offset = {low}, "
                                f"max offset = {high}")
        rebalance.seek(mq, offset)

    async def seek_to(self, code: int, mq: MessageQueue) -> None:
        """Seek ``mq`` to the offset GET_MIN_OFFSET or GET_MAX_OFFSET answers."""
        rebalance = self.require_rebalance()
        rebalance.seek(mq, await rebalance.instance.offset_request(code, mq))

    def pause(self, queues: Sequence[MessageQueue], paused: bool) -> None:
        table = self.process_queue_table
        for mq in queues:
            if mq in table:
                table[mq].paused = paused
