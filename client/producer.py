"""Producer: RocketMQ's DefaultMQProducer on asyncio.

``send`` resolves a route (auto-creating the topic from ``TBW102`` on the broker when allowed),
picks a queue round-robin (or the one you give, or a selector's choice), and retries on another
broker for RocketMQ's retryable codes and network errors; all attempts share the one
``send_msg_timeout``. Bodies of 4 KiB and more are zlib-compressed with the sysFlag set, and
every message gets a client-side UNIQ_KEY, the id users see.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import ssl
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import (
    ClientStateError,
    MessageValidationError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
)
from rocketmq_py.client.instance import ClientConfig, MQClientInstance, MQClientManager
from rocketmq_py.client.latency import LatencyFaultTolerance
from rocketmq_py.client.message import Message, SendResult, SendStatus
from rocketmq_py.client.message_id import create_uniq_id
from rocketmq_py.client.validators import (
    MAX_PROPERTIES_LENGTH,
    check_group,
    check_message,
    check_properties_length,
    check_send_topic,
    check_user_properties,
)
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeader, SendMessageRequestHeaderV2
from rocketmq_py.remoting.protocol.heartbeat import ConsumerData, ProducerData
from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB,
    BatchEntry,
    MessageConst,
    encode_batch,
    java_string_hash,
    properties_to_string,
)
from rocketmq_py.remoting.protocol.route import MASTER_ID, TopicRouteData
from rocketmq_py.remoting.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, PermName

if TYPE_CHECKING:
    from rocketmq_py.client.trace.async_trace_dispatcher import AsyncTraceDispatcher

log = logging.getLogger("rocketmq.client")

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
AUTO_CREATE_TOPIC_KEY = "TBW102"
# Codes for which the Java producer tries another broker (docs/protocol.md#errors-and-system-responses).
RETRY_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
                                  ResponseCode.NOT_IN_CURRENT_UNIT})
# The V2 header's keys a send sets itself (the rest come from the per-topic base), as declared.
_V2_QUEUE_ID, _V2_SYS_FLAG, _V2_BORN_TIMESTAMP, _V2_FLAG, _V2_PROPERTIES, _V2_RECONSUME_TIMES, _V2_BATCH, \
    _V2_MAX_RECONSUME_TIMES = map(SendMessageRequestHeaderV2.wire_key, (
        "queueId", "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "batch", "maxReconsumeTimes"))
_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK, ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

MessageQueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByHash: the same key always lands on the same queue (ordered messages)."""
    return mqs[abs(java_string_hash(str(arg))) % len(mqs)]


class TopicPublishInfo:
    def __init__(self, topic: str, route: TopicRouteData, max_queues: int | None = None) -> None:
        queues: list[MessageQueue] = []
        for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
            if not PermName.is_writeable(qd.perm):
                continue
            broker = next((b for b in route.brokerDatas if b.brokerName == qd.brokerName), None)
            if broker is None or MASTER_ID not in broker.brokerAddrs:
                continue
            count = qd.writeQueueNums if max_queues is None else min(max_queues, qd.writeQueueNums)
            queues.extend(MessageQueue(topic, qd.brokerName, i) for i in range(count))
        self.queues = queues
        self._index = itertools.count(random.randrange(1 << 16))

    def select(self, last_broker: str | None, fault: LatencyFaultTolerance | None) -> MessageQueue:
        n = len(self.queues)
        for _ in range(n):
            mq = self.queues[next(self._index) % n]
            if mq.broker_name != last_broker and (fault is None or fault.is_available(mq.broker_name)):
                return mq
        return self.queues[next(self._index) % n]


class Producer:
    def __init__(self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str | None = None, *,
                 instance_name: str = "DEFAULT", send_msg_timeout: float = 3.0, retry_times_when_send_failed: int = 2,
                 compress_msg_body_over: int = 4096, max_message_size: int = 4 * 1024 * 1024,
                 default_topic_queue_nums: int = 4, create_topic_key: str = AUTO_CREATE_TOPIC_KEY,
                 send_latency_fault_enable: bool = False,
                 session_credentials: SessionCredentials | None = None,
                 use_tls: bool | ssl.SSLContext = False, enable_msg_trace: bool = False,
                 custom_trace_topic: str | None = None) -> None:
        self.group = group
        self.config = ClientConfig(namesrv_addr=namesrv_addr, instance_name=instance_name,
                                   session_credentials=session_credentials, use_tls=use_tls)
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.compress_msg_body_over = compress_msg_body_over
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.fault = LatencyFaultTolerance() if send_latency_fault_enable else None
        self._instance: MQClientInstance | None = None
        self._publish: dict[str, TopicPublishInfo] = {}
        # (topic, broker) -> the constant part of a send's V2 header extFields.
        self._header_bases: dict[tuple[str, str], dict[str, str]] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self.shutdown_timeout = send_msg_timeout
        self._checked_topics: set[str] = set()
        # Message trace (client/trace/): on when asked for or given its own topic, as Java's
        # DefaultMQProducer(group, enableMsgTrace, customizedTraceTopic); off, sends pay one test.
        self._trace: AsyncTraceDispatcher | None = None
        if enable_msg_trace or custom_trace_topic:
            from rocketmq_py.client.trace.async_trace_dispatcher import AsyncTraceDispatcher
            self._trace = AsyncTraceDispatcher(group, "PRODUCER", custom_trace_topic, session_credentials, use_tls)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._instance is not None:
            return
        check_group(self.group)
        self._instance = await MQClientManager.acquire(self.config)
        self._instance.members[f"producer:{self.group}"] = self
        if self._trace is not None:
            await self._trace.start(self.config.namesrv_addr)

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is None:
            return
        # One bound for the whole shutdown, brokers up or not: in-flight async sends, then unregister.
        deadline = time.monotonic() + self.shutdown_timeout
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=self.shutdown_timeout)
        instance.members.pop(f"producer:{self.group}", None)
        try:
            await asyncio.wait_for(instance.unregister(producer_group=self.group),
                                   max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            log.warning("unregister of producer %s cut short by its shutdown timeout", self.group)
        await MQClientManager.release(instance)
        if self._trace is not None:
            await self._trace.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def heartbeat_data(self) -> tuple[list[ProducerData], list[ConsumerData]]:
        return [ProducerData(groupName=self.group)], []

    def topics(self) -> set[str]:
        return set(self._publish)

    # -- sending ----------------------------------------------------------------------------

    async def send(self, msg: Message, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: Any = None,
                   timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer (retrying on another broker when that helps).
        A message Java's client would refuse raises MessageValidationError here, and nothing
        is sent."""
        return await self._send(msg, queue, selector, arg, timeout, True)

    async def _send(self, msg: Message, queue: MessageQueue | None, selector: MessageQueueSelector | None,
                    arg: Any, timeout: float | None, user_properties: bool) -> SendResult:
        """``send``; ``user_properties`` False for the SDK's own sends, whose properties hold
        names a user may not set (a retry copy's RETRY_TOPIC, a half message's TRAN_MSG)."""
        instance = self._require_started()
        self._validate(msg, user_properties)
        begin = time.monotonic()
        deadline = begin + (timeout or self.send_msg_timeout)
        body, sys_flag = self._body(msg)
        props = msg.to_properties()
        props.setdefault(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id())
        publish = self._publish.get(msg.topic)  # the common case, without a coroutine
        if publish is None or not publish.queues:
            publish = await self._publish_info(instance, msg.topic, deadline)
        if queue is None and selector is not None:
            queue = selector(list(publish.queues), msg, arg)
        attempts = 1 if queue is not None else 1 + self.retry_times_when_send_failed
        last_error: Exception | None = None
        last_broker: str | None = None
        for _ in range(attempts):
            mq = queue or publish.select(last_broker, self.fault)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            started = time.monotonic()
            try:
                result = await self._send_to(instance, mq, msg, body, sys_flag, props, RequestCode.SEND_MESSAGE_V2,
                                             remaining)
            except (RemotingError, MQBrokerError) as exc:
                self._record_latency(mq.broker_name, started, failed=True)
                if isinstance(exc, MQBrokerError) and exc.code not in RETRY_RESPONSE_CODES:
                    raise
                log.warning("send to %s failed (%s), retrying on another broker", mq, exc)
                last_error, last_broker = exc, mq.broker_name
                continue
            self._record_latency(mq.broker_name, started, failed=False)
            if self._trace is not None:
                self._trace_send(instance, mq, msg.topic, props, len(body), result, started)
            return result
        raise MQClientError(f"Send [{attempts}] times, still failed, cost [{int((time.monotonic() - begin) * 1000)}]"
                            f"ms, Topic: {msg.topic}: {last_error or 'send timed out'}",
                            getattr(last_error, "code", None)) from last_error

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None],
                   **kwargs: Any) -> None:
        """Send in the background; ``callback(result, error)`` runs when it completes. A message
        Java's client would refuse raises here, at the call."""
        self._require_started()
        self._validate(msg)

        async def run() -> None:
            try:
                result = await self.send(msg, **kwargs)
            except Exception as exc:
                callback(None, exc)
            else:
                callback(result, None)

        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Write the message and do not wait for any answer (one attempt, as in Java)."""
        instance = self._require_started()
        self._validate(msg)
        deadline = time.monotonic() + self.send_msg_timeout
        body, sys_flag = self._body(msg)
        props = msg.to_properties()
        props.setdefault(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id())
        publish = await self._publish_info(instance, msg.topic, deadline)
        mq = queue or publish.select(None, self.fault)
        addr = await instance.master_addr(mq.topic, mq.broker_name)
        await instance.remoting.invoke_oneway(addr, self._request(mq, msg, body, sys_flag, props,
                                                                  RequestCode.SEND_MESSAGE_V2))

    async def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE: same topic, no delay, each message with its own UNIQ_KEY."""
        instance = self._require_started()
        if not msgs:
            raise MessageValidationError("the batch is empty")
        topic = msgs[0].topic
        entries = []
        uniq_keys: list[str] = []
        for m in msgs:
            self._validate(m)
            if m.topic != topic:
                raise MessageValidationError("the topic of the messages in one batch should be the same")
            if m.delay_time_level > 0:
                raise MessageValidationError("TimeDelayLevel is not supported for batching")
            if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MessageValidationError("Retry Group is not supported for batching")
            props = m.to_properties()
            props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
            uniq_keys.append(props.setdefault(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id()))
            properties = properties_to_string(props)
            check_properties_length(properties)
            entries.append(BatchEntry(m.flag, m.body, properties))
        body = encode_batch(entries)
        if len(body) > self.max_message_size:
            raise MessageValidationError(f"the batch is {len(body)} bytes, over the limit {self.max_message_size}")
        deadline = time.monotonic() + (timeout or self.send_msg_timeout)
        publish = await self._publish_info(instance, topic, deadline)
        mq = queue or publish.select(None, self.fault)
        batch_msg = Message(topic=topic, body=body)
        return await self._send_to(instance, mq, batch_msg, body, 0, {MessageConst.WAIT_STORE_MSG_OK: "true"},
                                   RequestCode.SEND_BATCH_MESSAGE, max(deadline - time.monotonic(), 0.001),
                                   uniq_keys=uniq_keys)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        instance = self._require_started()
        return list((await self._publish_info(instance, topic, time.monotonic() + self.send_msg_timeout)).queues)

    # -- internals --------------------------------------------------------------------------

    def _require_started(self) -> MQClientInstance:
        if self._instance is None:
            raise ClientStateError("The producer service state not OK, maybe started once or not started yet: "
                                   "call start() first")
        return self._instance

    def _validate(self, msg: Message, user_properties: bool = True) -> None:
        """Java's ``Validators.checkMessage`` at the call (client/validators.py); the user's
        properties too unless the SDK set them itself (a retry copy, a half message). A topic
        once found legal is not matched again: every send asks."""
        topic = msg.topic
        checked = topic.__class__ is str and topic in self._checked_topics
        if not checked:
            check_send_topic(topic)
            if len(self._checked_topics) < 4096:
                self._checked_topics.add(topic)
        check_message(msg, self.max_message_size, topic_checked=True)
        if user_properties and msg.properties \
                and check_user_properties(msg.properties) > MAX_PROPERTIES_LENGTH // 4:
            # Near the broker's limit: the whole string, as the send will write it.
            check_properties_length(properties_to_string(msg.to_properties()))

    def _trace_send(self, instance: MQClientInstance, mq: MessageQueue, topic: str, props: dict[str, str],
                    body_length: int, result: SendResult, started: float) -> None:
        """The Pub record of a send the broker answered (client/trace/trace_hooks.py)."""
        from rocketmq_py.client.trace.trace_hooks import send_message_after
        assert self._trace is not None
        started_ms = int((time.time() - (time.monotonic() - started)) * 1000)
        send_message_after(self._trace, self.group, topic, props, body_length,
                           instance.find_broker_address_in_publish(mq.broker_name) or "", result, started_ms)

    def _body(self, msg: Message) -> tuple[bytes, int]:
        body = msg.body
        if body.__class__ is not bytes:
            body = bytes(body)  # a bytearray or memoryview, checked by _validate: frozen as sent
        if len(body) >= self.compress_msg_body_over:
            # Java's default Deflater level 5; the type bits say zlib to 4.9.4+ consumers.
            return zlib.compress(body, 5), COMPRESSED_FLAG | COMPRESSION_ZLIB
        return body, 0

    def _record_latency(self, broker: str, started: float, failed: bool) -> None:
        if self.fault is not None:
            self.fault.update_fault_item(broker, int((time.monotonic() - started) * 1000), isolation=failed)

    def route_changed(self, topic: str, route: TopicRouteData) -> None:
        """The client instance refreshed ``topic``'s route: send to its queues as they are now."""
        if topic in self._publish:
            info = TopicPublishInfo(topic, route)
            if info.queues:
                self._publish[topic] = info

    async def _publish_info(self, instance: MQClientInstance, topic: str, deadline: float) -> TopicPublishInfo:
        info = self._publish.get(topic)
        if info is not None and info.queues:
            return info
        timeout = max(deadline - time.monotonic(), 0.001)
        try:
            route = await instance.update_topic_route(topic, timeout)
            info = TopicPublishInfo(topic, route)
        except NoRouteError as first:
            if first.code is None:
                raise  # no NameServer reached: the template topic would not be reached either
            # Auto-creation: send with the template topic's route; the broker creates the topic
            # from TBW102 if its autoCreateTopicEnable allows (docs/behaviours.md#topics).
            try:
                template = await instance.get_topic_route_from_namesrv(self.create_topic_key, timeout)
            except NoRouteError:
                raise NoRouteError(f"{first} -- and the auto-create template topic {self.create_topic_key} has no "
                                   "route either: autoCreateTopicEnable is off on every broker, so create the topic "
                                   "first (mqadmin updateTopic)", first.code) from None
            # As Java does, the template's route is kept under the new topic's name until the
            # NameServer knows the topic: it is what names the brokers this producer uses.
            instance.topic_route_table[topic] = template
            instance.remember_brokers(template)
            info = TopicPublishInfo(topic, template, self.default_topic_queue_nums)
        if not info.queues:
            raise NoRouteError(f"No writable queue of topic {topic} on a master broker", ResponseCode.TOPIC_NOT_EXIST)
        self._publish[topic] = info
        return info

    def _request(self, mq: MessageQueue, msg: Message, body: bytes, sys_flag: int, props: dict[str, str],
                 code: int) -> RemotingCommand:
        reconsume_times, max_reconsume_times = 0, None
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # A consumer re-sending a failed message itself: the broker reads the counts from the
            # header (and moves the message to the DLQ past the max), as Java's producer sends them.
            reconsume_times = int(props.get(MessageConst.RECONSUME_TIME) or 0)
            raw_max = props.get(MessageConst.MAX_RECONSUME_TIMES)
            max_reconsume_times = int(raw_max) if raw_max else None
        base = self._header_bases.get((mq.topic, mq.broker_name))
        if base is None:
            if len(self._header_bases) >= 4096:
                self._header_bases.clear()
            base = self._header_bases[(mq.topic, mq.broker_name)] = SendMessageRequestHeaderV2.from_v1(
                SendMessageRequestHeader(
                    producerGroup=self.group, topic=mq.topic, defaultTopic=self.create_topic_key,
                    defaultTopicQueueNums=self.default_topic_queue_nums, queueId=0, sysFlag=0, bornTimestamp=0,
                    flag=0, properties="", reconsumeTimes=0, unitMode=False, bname=mq.broker_name)).to_ext_fields()
        # The V2 header's extFields: the per-topic part made once, the rest set per send (every
        # send pays for this; building the typed header and converting it cost a sixth of a send).
        ext = base.copy()
        ext[_V2_QUEUE_ID] = str(mq.queue_id)
        ext[_V2_SYS_FLAG] = str(sys_flag)
        ext[_V2_BORN_TIMESTAMP] = str(int(time.time() * 1000))
        ext[_V2_FLAG] = str(msg.flag)
        ext[_V2_PROPERTIES] = properties = properties_to_string(props)
        check_properties_length(properties)
        ext[_V2_RECONSUME_TIMES] = str(reconsume_times)
        if code == RequestCode.SEND_BATCH_MESSAGE:
            ext[_V2_BATCH] = "true"
        if max_reconsume_times is not None:
            ext[_V2_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
        return RemotingCommand.request(code, ext, body)

    async def _send_to(self, instance: MQClientInstance, mq: MessageQueue, msg: Message, body: bytes, sys_flag: int,
                       props: dict[str, str], code: int, timeout: float,
                       uniq_keys: list[str] | None = None) -> SendResult:
        addr = instance.find_broker_address_in_publish(mq.broker_name) or await instance.master_addr(
            mq.topic, mq.broker_name)
        response = await instance.remoting.invoke(addr, self._request(mq, msg, body, sys_flag, props, code), timeout)
        status = _STATUS.get(response.code)
        if status is None:
            raise MQBrokerError(response.code, response.remark, addr)
        ext = response.ext_fields or {}
        uniq = ",".join(uniq_keys) if uniq_keys else props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        queue_id = int(ext.get("queueId", mq.queue_id))
        # The queue sent to when the broker answers with its id: no new MessageQueue per send.
        return SendResult(send_status=status, msg_id=uniq, offset_msg_id=ext.get("msgId", ""),
                          message_queue=mq if queue_id == mq.queue_id else MessageQueue(mq.topic, mq.broker_name,
                                                                                         queue_id),
                          queue_offset=int(ext.get("queueOffset", -1)),
                          region_id=ext.get("MSG_REGION", "DefaultRegion"),
                          trace_on=ext.get("TRACE_ON", "true") != "false")
