"""MQClientInstance: what every producer and consumer of one client id shares.

One per ``clientId`` (``ip@instanceName``), as in Java's MQClientManager: the NameServer list
(round-robin, failing over to the next one), the route cache refreshed every 30 s, the broker
address table, heartbeats to every broker every 30 s, and the long connections to each broker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rocketmq_py.acl.acl_client_rpc_hook import AclClientRPCHook
from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQBrokerError, MQClientError, NoRouteError
from rocketmq_py.common.busy_poll import DEFAULT_CLIENT_BUSY_POLL_MAX_MICROS
from rocketmq_py.common.heap import freeze_startup_heap, keep_freed_heap
from rocketmq_py.remoting.client import RemotingClient
from rocketmq_py.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType, offers_serialize_type
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.broker import decode_mq_keyed, encode_mq_keyed
from rocketmq_py.remoting.protocol.heartbeat import (
    CheckClientRequestBody,
    ConsumerData,
    ExpressionType,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
    UnregisterClientRequestHeader,
)
from rocketmq_py.remoting.protocol.message import MessageConst, RecordError, decode_record
from rocketmq_py.remoting.protocol.route import MASTER_ID, TopicRouteData
from rocketmq_py.remoting.protocol.topic import MAX_QUEUE_NUMS
from rocketmq_py.remoting.protocol.transaction import CheckTransactionStateRequestHeader
from rocketmq_py.remoting.tls import client_ssl_context

log = logging.getLogger("rocketmq.client")

CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


def bounded_route(topic: str, route: TopicRouteData) -> TopicRouteData:
    """``route`` with each broker's queue counts within 0..MAX_QUEUE_NUMS. Every member expands a
    route into one queue per count on each refresh and rebalance, and a NameServer (ours, or a
    Java one, which bounds nothing) may hold whatever a broker registered: 2,147,483,647 queues
    would hang them all. The counts beyond are not used, with a warning."""
    for qd in route.queueDatas:
        for name in ("readQueueNums", "writeQueueNums"):
            count = getattr(qd, name)
            if not 0 <= count <= MAX_QUEUE_NUMS:
                bounded = min(max(count, 0), MAX_QUEUE_NUMS)
                log.warning("route of %s: broker %s has %s %d, using %d", topic, qd.brokerName, name, count, bounded)
                setattr(qd, name, bounded)
    return route


@dataclass
class ClientConfig:
    namesrv_addr: str | None = None
    instance_name: str = "DEFAULT"
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    mq_client_api_timeout: float = 3.0
    language: int = LanguageCode.PYTHON
    # Write msgpack headers to brokers that offer them in their HEART_BEAT answer (rocketmq-py's
    # do; a Java broker does not, and gets JSON). False: JSON to every broker.
    msgpack_headers: bool = True
    # How long the event loop may keep polling after a read before it sleeps, in microseconds
    # (common/busy_poll.py): a producer waiting on its answer, and a consumer on its held pull,
    # is awake when it comes. 0: off. docs/latency.md says what it costs.
    busy_poll_max_micros: int = DEFAULT_CLIENT_BUSY_POLL_MAX_MICROS
    # The process's heap at the first client's start frozen out of the cyclic GC (common/heap.py):
    # full collections then no longer stall the loop for milliseconds. False: the GC left alone.
    freeze_heap_at_start: bool = True
    # glibc's malloc told at the first client's start to keep freed memory for reuse rather than
    # give it back and fault it in again at the next large allocation (common/heap.py): a
    # consumer reading 512 KiB pull answers took a page fault per 4 KiB received. False: left alone.
    keep_freed_heap_at_start: bool = True
    # An ACL account: every request this client writes, to NameServers and brokers, is signed
    # with it (Java's AclClientRPCHook); None sends unsigned requests.
    session_credentials: SessionCredentials | None = None
    # TLS to NameServers and brokers (Java's ClientConfig.useTLS): True for Java's default client
    # context (the server's certificate not verified), or an SSLContext of the caller's.
    use_tls: bool | ssl.SSLContext = False

    def tls_context(self) -> ssl.SSLContext | None:
        if isinstance(self.use_tls, ssl.SSLContext):
            return self.use_tls
        return client_ssl_context() if self.use_tls else None

    def namesrv_addrs(self) -> list[str]:
        addr = self.namesrv_addr or os.environ.get("NAMESRV_ADDR", "")
        return [a.strip() for a in addr.split(";") if a.strip()]


class _Member(Protocol):
    def heartbeat_data(self) -> tuple[list[ProducerData], list[ConsumerData]]:
        ...

    def topics(self) -> set[str]: ...


def _client_ip() -> str:
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            if not str(info[4][0]).startswith("127."):
                return str(info[4][0])
    except OSError:
        pass
    return "127.0.0.1"


def build_client_id(instance_name: str) -> str:
    # Java replaces the DEFAULT instance name by "<pid>#<nanoTime>" so that two processes on one
    # host never share a client id (brokers would treat them as one consumer).
    name = instance_name if instance_name != "DEFAULT" else f"{os.getpid()}#{time.monotonic_ns()}"
    return f"{_client_ip()}@{name}"


@dataclass
class MQClientInstance:
    config: ClientConfig
    client_id: str
    remoting: RemotingClient = field(default_factory=RemotingClient)
    topic_route_table: dict[str, TopicRouteData] = field(default_factory=dict)
    broker_addr_table: dict[str, dict[int, str]] = field(default_factory=dict)
    members: dict[str, _Member] = field(default_factory=dict)
    # consumer group -> callbacks run when the broker says the group's members changed
    consumer_listeners: dict[str, list[Callable[[], None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ns_index = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._greetings: set[asyncio.Task[None]] = set()
        self._route_lookups: dict[str, asyncio.Future[TopicRouteData]] = {}
        self._started = False
        self.remoting.config.busy_poll_max_micros = self.config.busy_poll_max_micros
        self.remoting.config.ssl_context = self.config.tls_context()
        if self.config.session_credentials is not None:
            self.remoting.rpc_hooks.append(AclClientRPCHook(self.config.session_credentials))
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        self.remoting.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_running_info)
        self.remoting.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_get_consumer_status)
        self.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)

    def _consumer(self, group: str) -> Any:
        return self.members.get(f"consumer:{group}")

    async def _on_get_running_info(self, conn: object, request: RemotingCommand) -> RemotingCommand:
        group = (request.ext_fields or {}).get("consumerGroup", "")
        consumer = self._consumer(group)
        if consumer is None:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The Consumer Group <{group}> not exist in this consumer")
        return request.response(body=consumer.consumer_running_info())

    async def _on_get_consumer_status(self, conn: object, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the group's offsets of one topic (GetConsumerStatusBody)."""
        ext = request.ext_fields or {}
        consumer = self._consumer(ext.get("group", ""))
        offsets = {} if consumer is None else {
            tuple(mq): off for mq, off in consumer.committed_offsets().items() if mq.topic == ext.get("topic")}
        body = encode_mq_keyed("messageQueueTable", offsets)[:-1] + b',"consumerTable":{}}'
        return request.response(body=body)

    async def _on_check_transaction_state(self, conn: object, request: RemotingCommand) -> None:
        """A broker asks about a half message: hand it to this instance's producer of its PGROUP."""
        addr = getattr(conn, "remote_addr", "?")
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields or {})
            msg = decode_record(request.body or b"", decompress=True)
        except (ValueError, RecordError) as exc:
            log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", addr, exc)
            return
        group = msg.properties.get(MessageConst.PRODUCER_GROUP, "")
        check = getattr(self.members.get(f"producer:{group}"), "check_transaction_state", None)
        if check is None:
            log.debug("checkTransactionState, pick producer by group[%s] failed", group)
            return
        check(addr, msg, header)

    async def _on_consumer_ids_changed(self, conn: object, request: RemotingCommand) -> None:
        group = (request.ext_fields or {}).get("consumerGroup", "")
        log.info("receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                 getattr(conn, "remote_addr", "?"), group)
        for listener in self.consumer_listeners.get(group, []):
            listener()

    async def _on_reset_offset(self, conn: object, request: RemotingCommand) -> None:
        """The broker resets a group's offsets (mqadmin resetOffsetByTime): our consumer of that
        group starts its queues of the topic again from the offsets in the body."""
        ext = request.ext_fields or {}
        group, topic = ext.get("group", ""), ext.get("topic", "")
        try:
            table = decode_mq_keyed(request.body or b"{}", "offsetTable")
        except ValueError as exc:
            log.warning("reset offset request for %s from %s has a bad body: %s", group,
                        getattr(conn, "remote_addr", "?"), exc)
            return
        member = self.members.get(f"consumer:{group}")
        reset = getattr(member, "reset_offsets", None)
        if reset is None:
            return
        log.info("invoke reset offset operation from broker. brokerAddr=%s, topic=%s, group=%s, timestamp=%s",
                 getattr(conn, "remote_addr", "?"), topic, group, ext.get("timestamp"))
        reset({MessageQueue(t, b, q): int(off) for (t, b, q), off in table.items() if t == topic})

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.config.freeze_heap_at_start:
            freeze_startup_heap()
        if self.config.keep_freed_heap_at_start:
            keep_freed_heap()
        self.remoting.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._periodic(self.config.poll_name_server_interval,
                                                       self.update_all_topic_routes)),
                       loop.create_task(self._periodic(self.config.heartbeat_broker_interval,
                                                       self.send_heartbeat_to_all_brokers))]

    async def _periodic(self, interval: float, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception:
                log.exception("periodic client task failed")

    async def shutdown(self) -> None:
        for task in [*self._tasks, *self._greetings]:
            task.cancel()
        await self.remoting.close()
        self._started = False

    # -- NameServers and routes -------------------------------------------------------------

    async def get_topic_route_from_namesrv(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """Ask NameServers in turn (round-robin start); NoRouteError says what each answered."""
        addrs = self.config.namesrv_addrs()
        if not addrs:
            raise NoRouteError(f"No name server address, set namesrv_addr or NAMESRV_ADDR (topic {topic})")
        start = next(self._ns_index)
        answers = []
        reached = False
        for i in range(len(addrs)):
            addr = addrs[(start + i) % len(addrs)]
            try:
                response = await self.remoting.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}),
                    timeout or self.config.mq_client_api_timeout)
            except RemotingError as exc:
                answers.append(f"{addr}: {exc}")
                continue
            reached = True
            if response.code == ResponseCode.SUCCESS and response.body:
                return bounded_route(topic, TopicRouteData.decode(response.body))
            answers.append(f"{addr}: code {response.code} {(response.remark or '').splitlines()[0]}")
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                break  # a definite answer: every NameServer holds the same routes
        # The code is what a NameServer answered; None when not one of them could be reached.
        raise NoRouteError(f"No route info of this topic: {topic}; NameServers answered: {'; '.join(answers)}",
                           ResponseCode.TOPIC_NOT_EXIST if reached else None)

    async def update_topic_route(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """Look ``topic``'s route up and cache it. Callers asking while a look-up of it is under
        way share that one: the first sends to a new topic, dozens at once under load, would
        otherwise each ask a NameServer and parse the answer (10 of them cost 2.7 ms)."""
        lookup = self._route_lookups.get(topic)
        if lookup is None:
            lookup = self._route_lookups[topic] = asyncio.ensure_future(self._lookup_route(topic, timeout))
            lookup.add_done_callback(lambda _: self._route_lookups.pop(topic, None))
        # Shielded: a caller that gives up (its send timed out) leaves the look-up to the others.
        # Each look-up is bounded as before: ``timeout`` per NameServer asked.
        return await asyncio.shield(lookup)

    async def _lookup_route(self, topic: str, timeout: float | None) -> TopicRouteData:
        route = await self.get_topic_route_from_namesrv(topic, timeout)
        self.set_topic_route(topic, route)
        return route

    def set_topic_route(self, topic: str, route: TopicRouteData) -> None:
        """Cache a topic's route and tell the members (a producer refreshes its queues: a
        broker or queues added to the topic are used from the next send on)."""
        self.topic_route_table[topic] = route
        self.remember_brokers(route)
        for member in self.members.values():
            changed = getattr(member, "route_changed", None)
            if changed is not None:
                changed(topic, route)

    def remember_brokers(self, route: TopicRouteData) -> None:
        """Take the route's broker addresses; masters new to this instance are greeted."""
        known = {addr for addrs in self.broker_addr_table.values() for addr in addrs.values()}
        for bd in route.brokerDatas:
            self.broker_addr_table[bd.brokerName] = dict(bd.brokerAddrs)
        new = [addr for bd in route.brokerDatas for bid, addr in bd.brokerAddrs.items()
               if bid == MASTER_ID and addr not in known]
        if new:
            self._greet(new)

    async def update_all_topic_routes(self) -> None:
        topics = set().union(*(m.topics() for m in self.members.values())) if self.members else set()
        for topic in topics:
            try:
                await self.update_topic_route(topic)
            except (NoRouteError, RemotingError) as exc:
                log.warning("updateTopicRouteInfoFromNameServer %s failed: %s", topic, exc)
        self._clean_offline_brokers()

    def _clean_offline_brokers(self) -> None:
        named = {bd.brokerName for route in self.topic_route_table.values() for bd in route.brokerDatas}
        for name in list(self.broker_addr_table):
            if name not in named:
                del self.broker_addr_table[name]

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int) -> tuple[str, bool] | None:
        """Where to pull from: ``broker_id`` of ``broker_name`` when the route has it, else any
        member (a slave while the master is gone), with whether it is a slave (Java's
        findBrokerAddressInSubscribe with onlyThisBroker false)."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is None:
            broker_id = min(addrs)
            addr = addrs[broker_id]
        return addr, broker_id != MASTER_ID

    def find_broker_address_in_admin(self, broker_name: str) -> str | None:
        """The master of ``broker_name``, else any member (offsets are committed to a slave while
        the master is gone, as Java's findBrokerAddressInAdmin does)."""
        addrs = self.broker_addr_table.get(broker_name)
        return addrs[min(addrs)] if addrs else None

    async def subscribe_addr(self, topic: str, broker_name: str, broker_id: int) -> tuple[str, bool]:
        """``find_broker_address_in_subscribe``, refreshing the topic's route once if needed."""
        found = self.find_broker_address_in_subscribe(broker_name, broker_id)
        if found is None:
            await self.update_topic_route(topic)
            found = self.find_broker_address_in_subscribe(broker_name, broker_id)
        if found is None:
            raise MQClientError(f"The broker[{broker_name}] not exist (not in the route of {topic})")
        return found

    async def master_addr(self, topic: str, broker_name: str) -> str:
        """The master of ``broker_name``, refreshing the topic's route once if it is unknown."""
        addr = self.find_broker_address_in_publish(broker_name)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_address_in_publish(broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist (no master in the route of {topic})")
        return addr

    async def offset_request(self, code: int, mq: MessageQueue, extra: dict[str, str] | None = None) -> int:
        """An offset of ``mq`` its broker answers (GET_MIN_OFFSET, GET_MAX_OFFSET,
        SEARCH_OFFSET_BY_TIMESTAMP, QUERY_CONSUMER_OFFSET: Java's MQAdminImpl and
        queryConsumerOffset); -1 for QUERY_NOT_FOUND. Asked of the master, else of a slave while
        the master is gone (offsets and bounds are read there)."""
        addr = self.find_broker_address_in_admin(mq.broker_name) or await self.master_addr(mq.topic, mq.broker_name)
        header = {"topic": mq.topic, "queueId": str(mq.queue_id), **(extra or {})}
        r = await self.remoting.invoke(addr, RemotingCommand.request(code, header), self.config.mq_client_api_timeout)
        if r.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if r.code != ResponseCode.SUCCESS:
            raise MQClientError(f"offset request {code} for {mq} failed: {r.remark}", r.code, r.remark)
        return int((r.ext_fields or {})["offset"])

    async def check_client_in_broker(self, group: str, subscriptions: list[SubscriptionData]) -> None:
        """Java's checkClientInBroker: each non-TAG subscription is compiled by the masters
        serving its topic, so a bad selector or a broker without property filtering fails a
        consumer's start with the broker's reason instead of its pulls failing later."""
        for sub in subscriptions:
            if sub.expressionType == ExpressionType.TAG:
                continue
            route = self.topic_route_table.get(sub.topic)
            for bd in route.brokerDatas if route else []:
                addr = bd.brokerAddrs.get(MASTER_ID)
                if addr is None:
                    continue
                body = CheckClientRequestBody(clientId=self.client_id, group=group, subscriptionData=sub)
                try:
                    r = await self.remoting.invoke(
                        addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, body.encode()),
                        self.config.mq_client_api_timeout)
                except RemotingError as exc:
                    raise MQClientError(f"Check client in broker {addr} error, maybe because you use "
                                        f"{sub.expressionType} to filter message: {exc}") from exc
                if r.code != ResponseCode.SUCCESS:
                    raise MQBrokerError(r.code, r.remark, addr)

    # -- heartbeats -------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        producers: list[ProducerData] = [ProducerData(groupName=CLIENT_INNER_PRODUCER_GROUP)]
        consumers = []
        for member in self.members.values():
            p, c = member.heartbeat_data()
            producers.extend(p)
            consumers.extend(c)
        return HeartbeatData(clientID=self.client_id, producerDataSet=producers, consumerDataSet=consumers)

    async def send_heartbeat_to_all_brokers(self) -> None:
        body = self.heartbeat_data().encode()
        has_consumers = b'"consumerDataSet":[]' not in body
        for addrs in list(self.broker_addr_table.values()):
            for broker_id, addr in addrs.items():
                if broker_id != MASTER_ID and not has_consumers:
                    continue  # producers only talk to masters
                await self._heartbeat(addr, body)

    async def _heartbeat(self, addr: str, body: bytes) -> None:
        try:
            response = await self.remoting.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, body),
                                                  self.config.mq_client_api_timeout)
        except RemotingError as exc:
            log.info("send heart beat to broker[%s] failed: %s", addr, exc)
            return
        if self.config.msgpack_headers and response.code == ResponseCode.SUCCESS and \
                offers_serialize_type(response.ext_fields, SerializeType.MSGPACK):
            self.remoting.set_request_serialize_type(addr, SerializeType.MSGPACK)

    def _greet(self, addrs: list[str]) -> None:
        """Heartbeat brokers new to this instance at once rather than at the next 30 s tick: the
        broker learns the groups (transaction check-backs need the producer's) and this side
        learns which headers the broker reads before most of its requests are written."""
        if not self._started:
            return
        body = self.heartbeat_data().encode()
        for addr in addrs:
            task = asyncio.get_running_loop().create_task(self._heartbeat(addr, body))
            self._greetings.add(task)
            task.add_done_callback(self._greetings.discard)

    async def unregister(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        header = UnregisterClientRequestHeader(clientID=self.client_id, producerGroup=producer_group,
                                               consumerGroup=consumer_group)
        for addrs in list(self.broker_addr_table.values()):
            for addr in addrs.values():
                try:
                    await self.remoting.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header),
                                               self.config.mq_client_api_timeout)
                except RemotingError as exc:
                    log.info("unregister client at %s failed: %s", addr, exc)


class MQClientManager:
    """One instance per client id, shared by the producers and consumers that use it."""

    # Keyed by client id and credentials: clients of one instance name that sign as different
    # accounts must not share connections whose requests one account signs.
    _instances: dict[tuple[str, SessionCredentials | None, object], MQClientInstance] = {}
    _users: dict[tuple[str, SessionCredentials | None, object], int] = {}

    @classmethod
    async def acquire(cls, config: ClientConfig) -> MQClientInstance:
        client_id = build_client_id(config.instance_name)
        key = (client_id, config.session_credentials, config.use_tls)
        instance = cls._instances.get(key)
        if instance is None:
            instance = cls._instances[key] = MQClientInstance(config, client_id)
        cls._users[key] = cls._users.get(key, 0) + 1
        await instance.start()
        return instance

    @classmethod
    async def release(cls, instance: MQClientInstance) -> None:
        key = (instance.client_id, instance.config.session_credentials, instance.config.use_tls)
        left = cls._users.get(key, 1) - 1
        if left <= 0:
            cls._users.pop(key, None)
            cls._instances.pop(key, None)
            await instance.shutdown()
        else:
            cls._users[key] = left
