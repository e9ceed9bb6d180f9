"""RebalanceImpl: which queues this member of a group consumes, and the table of those it holds.

Subscribed topics' readable queues are split among the group's members (the consumer ids a
broker knows) by the allocation strategy, every member computing the same split; a broadcasting
member takes them all, and ``assign`` fixes the set instead (Java's ASSIGN mode). Queues gained
start pulling; queues lost stop, with their offsets committed (with auto-commit) and, for an
orderly consumer, their broker locks released. An orderly consumer locks its queues at their
masters (LOCK_BATCH_MQ) after every rebalance and treats a lock as lost 30 s after its last
grant (docs/behaviours.md#orderly-consumption-locks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from rocketmq_py.client.allocate import AllocateMessageQueueStrategy, MessageQueue
from rocketmq_py.client.errors import MQClientError, NoRouteError
from rocketmq_py.client.instance import MQClientInstance
from rocketmq_py.client.offset_store import OffsetStore
from rocketmq_py.client.process_queue import ProcessQueue
from rocketmq_py.client.pull_message_service import PullMessageService
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerIdList,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueueBody,
    SubscriptionData,
)
from rocketmq_py.remoting.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, PermName

log = logging.getLogger("rocketmq.client")

# rocketmq.client.rebalance.lockMaxLiveTime: the client's lock lifetime (the broker keeps one 60 s).
CLIENT_LOCK_MAX_LIVE_TIME = 30.0


class RebalanceImpl:
    def __init__(self, instance: MQClientInstance, group: str, message_model: MessageModel,
                 strategy: AllocateMessageQueueStrategy, subscriptions: dict[str, SubscriptionData],
                 offset_store: OffsetStore, pull_service: PullMessageService, *,
                 consume_from_where: ConsumeFromWhere, consume_timestamp: int, auto_commit: bool,
                 consume_orderly: bool, assigned: list[MessageQueue] | None) -> None:
        self.instance = instance
        self.group = group
        self.message_model = message_model
        self.strategy = strategy
        self.subscriptions = subscriptions
        self.offset_store = offset_store
        self.pull_service = pull_service
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp
        self.auto_commit = auto_commit
        self.consume_orderly = consume_orderly
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        # Orderly: queue -> when the broker last granted us its lock.
        self.lock_table: dict[MessageQueue, float] = {}
        self.assigned = assigned
        # A subscribed topic had no route at the last rebalance (RebalanceService looks again soon).
        self.unrouted = False

    # -- the table --------------------------------------------------------------------------

    def assign(self, queues: list[MessageQueue]) -> None:
        """Hold exactly these queues from now on, with no rebalancing."""
        self.assigned = queues
        self.update_process_queue_table(queues)

    def update_process_queue_table(self, wanted: Sequence[MessageQueue]) -> list[ProcessQueue]:
        """Start pulling new queues and stop removed ones; returns the removed queues."""
        table = self.process_queue_table
        removed = [table.pop(mq) for mq in list(table) if mq not in wanted]
        for pq in removed:
            if pq.task:
                pq.task.cancel()
        for mq in wanted:
            if mq not in table:
                pq = table[mq] = ProcessQueue(mq)
                self.pull_service.execute_pull_request(pq)
        return removed

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Pull ``mq`` from ``offset`` next, in a fresh ProcessQueue: what the old one pulled, or
        is still consuming, no longer counts."""
        pq = self.process_queue_table.get(mq)
        if pq is None:
            raise MQClientError(f"The message queue is not in assigned list, may be rebalancing, {mq}")
        if pq.task:
            pq.task.cancel()
        fresh = self.process_queue_table[mq] = ProcessQueue(mq, offset, offset, pq.paused)
        self.pull_service.execute_pull_request(fresh)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The committed offset, else where consumeFromWhere says (docs/behaviours.md#consumer-defaults)."""
        committed = await self.offset_store.read_offset(mq)
        if committed >= 0:
            return committed
        if self.consume_from_where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if (self.consume_from_where == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
                and not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)):
            return await self.instance.offset_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq,
                                                      {"timestamp": str(self.consume_timestamp)})
        return await self.instance.offset_request(RequestCode.GET_MAX_OFFSET, mq)

    # -- rebalancing ------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        if self.assigned is None:  # assign() fixes the queues, also when called after start
            wanted: list[MessageQueue] = []
            self.unrouted = False
            for topic in self.subscriptions:
                allocated = await self._rebalance_by_topic(topic)
                if allocated is None:
                    # Java's rebalanceByTopic: with no queue set or no consumer ids it logs and
                    # changes nothing, so an unreachable NameServer or broker never empties an
                    # assignment.
                    allocated = [mq for mq in self.process_queue_table if mq.topic == topic]
                wanted.extend(allocated)
            removed = self.update_process_queue_table(wanted)
            if removed and self.auto_commit:
                await self.offset_store.persist_all(removed)
            if removed and self.consume_orderly:
                await self.unlock([pq.mq for pq in removed])
        if self.consume_orderly:
            await self.lock_all()

    async def _rebalance_by_topic(self, topic: str) -> list[MessageQueue] | None:
        """This member's queues of ``topic``, or None when that cannot be known right now."""
        instance = self.instance
        try:
            route = await instance.update_topic_route(topic)
        except (NoRouteError, RemotingError) as exc:
            cached = instance.topic_route_table.get(topic)  # the cached route, as Java's table
            log.warning("rebalance: %s%s", exc, "; using the cached route" if cached else "")
            if cached is None:
                self.unrouted = True
                return None
            route = cached
        mq_all = sorted(MessageQueue(topic, qd.brokerName, q) for qd in route.queueDatas
                        if PermName.is_readable(qd.perm) for q in range(qd.readQueueNums))
        if not mq_all:
            return None
        if self.message_model == MessageModel.BROADCASTING:
            return mq_all  # every member consumes every queue
        cids = await self._find_consumer_id_list(topic)
        if instance.client_id not in cids:
            # The broker has not heard from us yet (the route, and so the broker, was unknown
            # at start): heartbeat now, as Java does on a new route, and ask again.
            await instance.send_heartbeat_to_all_brokers()
            cids = await self._find_consumer_id_list(topic)
        if not cids:
            log.warning("doRebalance, %s, %s, get consumer id list failed; assignment unchanged", self.group, topic)
            return None
        return self.strategy.allocate(self.group, instance.client_id, mq_all, sorted(cids))

    async def _find_consumer_id_list(self, topic: str) -> list[str]:
        instance = self.instance
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

    # -- orderly locks ----------------------------------------------------------------------

    async def lock_all(self) -> None:
        granted = await self._lock_request(RequestCode.LOCK_BATCH_MQ, list(self.process_queue_table))
        now = time.monotonic()
        for mq in list(self.lock_table):
            if mq not in granted:
                del self.lock_table[mq]
        for mq in granted:
            self.lock_table[mq] = now

    async def unlock(self, queues: list[MessageQueue]) -> None:
        await self._lock_request(RequestCode.UNLOCK_BATCH_MQ, queues)

    def holds_lock(self, mq: MessageQueue) -> bool:
        granted = self.lock_table.get(mq)
        return granted is not None and time.monotonic() - granted < CLIENT_LOCK_MAX_LIVE_TIME

    async def _lock_request(self, code: int, queues: list[MessageQueue]) -> set[MessageQueue]:
        instance = self.instance
        granted: set[MessageQueue] = set()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, mqs in by_broker.items():
            body = LockBatchRequestBody(clientId=instance.client_id, consumerGroup=self.group, mqSet=[
                MessageQueueBody(brokerName=m.broker_name, queueId=m.queue_id, topic=m.topic) for m in mqs])
            try:
                addr = await instance.master_addr(mqs[0].topic, broker)
                r = await instance.remoting.invoke(addr, RemotingCommand.request(code, None, body.encode()),
                                                   instance.config.mq_client_api_timeout)
            except (MQClientError, RemotingError) as exc:
                log.warning("%s at %s failed: %s", "lock" if code == RequestCode.LOCK_BATCH_MQ else "unlock",
                            broker, exc)
                continue
            if code == RequestCode.LOCK_BATCH_MQ and r.code == ResponseCode.SUCCESS and r.body:
                granted |= {MessageQueue(m.topic, m.brokerName, m.queueId)
                            for m in LockBatchResponseBody.decode(r.body).lockOKMQSet}
        return granted
