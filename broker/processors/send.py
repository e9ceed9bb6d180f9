"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE (Java's SendMessageProcessor).

Checks run in RocketMQ's order -- broker permission, topic name, system topics, topic existence
(auto-creation), queue id -- and each failure answers with RocketMQ's code and a remark, before
the store is touched. The stored STOREHOST and the offset message id carry the broker's
advertised address, which is where clients send retries and VIEW_MESSAGE_BY_ID.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from rocketmq_py.broker.mqtrace import SendMessageContext, SendMessageHook, told
from rocketmq_py.broker.processors.send_plain import plain_properties, store_plain_sends
from rocketmq_py.broker.schedule_message_service import DelayLevelError
from rocketmq_py.broker.topic_config_manager import (
    DLQ_NUMS_PER_GROUP,
    DLQ_PERM,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    validate_topic,
)
from rocketmq_py.remoting.codes import V3_4_9, RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.header import parse_int, shown
from rocketmq_py.remoting.processor import ProcessorResult, RequestProcessor
from rocketmq_py.remoting.protocol.batch_body import split_batch_merged
from rocketmq_py.remoting.protocol.broker import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    send_response_fields,
)
from rocketmq_py.remoting.protocol.message import (
    MULTI_TAGS_FLAG,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    RecordError,
    find_property,
    find_raw_property,
    properties_to_string,
    raw_property_prefix,
    string_to_properties,
    tags_string_to_tags_code,
)
from rocketmq_py.remoting.protocol.topic import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    PermName,
    TopicConfig,
    TopicFilterType,
    dlq_topic,
)
from rocketmq_py.store.commit_log import MessageExtBatch, MessageExtBrokerInner
from rocketmq_py.store.config import SCHEDULE_TOPIC
from rocketmq_py.store.message_store import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

_RAW_SEPARATOR = PROPERTY_SEPARATOR.encode()
_RAW_DELAY = raw_property_prefix(MessageConst.DELAY_TIME_LEVEL)
_RAW_TRANSACTION = raw_property_prefix(MessageConst.TRANSACTION_PREPARED)
_RAW_CLUSTER = raw_property_prefix(MessageConst.CLUSTER)
_RAW_TAGS = raw_property_prefix(MessageConst.TAGS)

# Clients may not send to the broker's internal topics (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
                                     "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})

_STATUS_TO_CODE = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR,
                                               "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL,
                                       "the message is illegal, maybe msg body or properties length not matched."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL,
                                                "the message is illegal, maybe msg properties length limit 32k."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE,
                                             "service not available now. It may be caused by one of the following "
                                             "reasons: the broker's disk is full, messages are put to the slave, "
                                             "message store has been shut down, etc."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR,
                                         "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}

# Delay levels apply to plain and committed messages; a half message waits for its outcome first.
_DELAYABLE = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
_READ_V1 = SendMessageRequestHeader.decoder()
_READ_V2 = SendMessageRequestHeaderV2.decoder()
# A batch's merging context (_batch_merging): the delay level's refusal, the header's pairs by their
# prefixes, CLUSTER as appended, the entries' properties merged so far, and what the walks found of
# properties differing only by their UNIQ_KEY's value (batch_body._merged).
_BatchMerging = tuple[str | None, list[tuple[bytes, bytes]], bytes, dict[bytes, tuple[bytes, int]],
                      dict[bytes, tuple[bytes, int]]]
# Bounds of what is kept: header properties (a producer's rarely change), and per header properties,
# distinct entry properties no longer than _MERGED_MAX_LENGTH (repeated tags; each entry's own
# UNIQ_KEY makes its properties new, but the walk asks for one merge per batch of those): at most
# about 16 x 256 x 1.5 KiB.
_MERGINGS_KEPT = 16
_MERGED_KEPT = 256
_MERGED_MAX_LENGTH = 512
# Of properties differing only by their UNIQ_KEY's value, kept whatever their length: fewer.
_KEYED_KEPT = 32
_RAW_UNIQ_KEY = f"{MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX}{NAME_VALUE_SEPARATOR}".encode()
_STORED_CODES = frozenset({ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                           ResponseCode.SLAVE_NOT_AVAILABLE})


def _parse_host(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port) if port.isdigit() else 0


class SendMessageProcessor(RequestProcessor):
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Names that passed validate_topic and are not internal: a name's validity never changes,
        # and the check costs more than the rest of the send's checks together.
        self.valid_topic_names: set[str] = set()
        # What plain sends read of a topic's config (send_plain.plain_topic), as of the topic
        # configs' data version (counter, timestamp).
        self.plain_topics: dict[str, tuple[str, int, int]] = {}
        self.plain_topics_version: tuple[int, int] | None = None
        self.born_hosts: dict[str, tuple[str, int]] = {}
        # A batch's entries mostly repeat a few tags: their codes by the tags' raw bytes.
        self._raw_tags_codes: dict[bytes, int] = {}
        # What a batch's header properties and the cluster name make of its entries' properties
        # (_batch_merging), by (header properties, cluster name): a producer sends the same header
        # properties, and its entries mostly the same properties, batch after batch.
        self._batch_mergings: dict[tuple[str, str], _BatchMerging] = {}
        # The cluster name, and CLUSTER as a stored message's last property: after a separator,
        # and alone (after properties that end with one, or none).
        self.cluster = ("", "", "")
        # Java's AbstractSendMessageProcessor.sendMessageHookList: told of every send (metrics)
        self.send_message_hooks: list[SendMessageHook] = []

    def register_send_message_hook(self, hook: SendMessageHook) -> None:
        self.send_message_hooks.append(hook)

    def cluster_entries(self, name: str) -> tuple[str, str, str]:
        """``cluster`` for the current cluster name (UPDATE_BROKER_CONFIG may change it)."""
        entries = self.cluster
        if entries[0] != name:
            entry = f"{MessageConst.CLUSTER}{NAME_VALUE_SEPARATOR}{name}"
            entries = self.cluster = (name, PROPERTY_SEPARATOR + entry, entry)
        return entries

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> ProcessorResult:
        """The answer itself when it is ready at once (ASYNC_FLUSH, most sends), or a coroutine
        that waits for the flush; the send hooks told before and after."""
        hooks = self.send_message_hooks
        if not hooks:
            return self._process(conn, request)
        context = SendMessageContext.of(conn.remote_addr, request)
        for hook in hooks:
            told(hook.send_message_before, context)
        return self._send_message_after(context, self._process(conn, request))

    def process_requests(self, conn: RemotingConnection, requests: list[RemotingCommand]) -> list[ProcessorResult]:
        """The leading plain sends of ``requests``, stored in one run, with their answers
        (send_plain.py, the fast path this processor's full path is the reference for). Which
        sends a run takes is known once it is stored: the hooks hear of each taken send then,
        before and after together."""
        results = store_plain_sends(self, conn, requests)
        hooks = self.send_message_hooks
        if not hooks or not results:
            return results
        addr = conn.remote_addr
        hooked: list[ProcessorResult] = []
        for request, result in zip(requests, results, strict=False):
            context = SendMessageContext.of(addr, request)
            for hook in hooks:
                told(hook.send_message_before, context)
            hooked.append(self._send_message_after(context, result))
        return hooked

    def _send_message_after(self, context: SendMessageContext, result: ProcessorResult) -> ProcessorResult:
        if result is None or type(result) is RemotingCommand:
            return self._told_after(context, result)
        # type-ignored: neither None nor a RemotingCommand is the awaitable (exact-type test, not narrowed)
        return self._told_when_answered(context, result)  # type: ignore[arg-type]

    async def _told_when_answered(self, context: SendMessageContext, pending: Awaitable[RemotingCommand | None]
                                  ) -> RemotingCommand | None:
        return self._told_after(context, await pending)

    def _told_after(self, context: SendMessageContext, response: RemotingCommand | None) -> RemotingCommand | None:
        context.response = response
        for hook in self.send_message_hooks:
            told(hook.send_message_after, context)
        return response

    def _process(self, conn: RemotingConnection, request: RemotingCommand) -> ProcessorResult:
        """A plain send takes the fast path; anything else, this one."""
        plain = store_plain_sends(self, conn, [request])  # [] unless a plain V2 send
        if plain:
            return plain[0]
        ext = request.ext_fields or {}
        header = _READ_V1(ext) if request.code == RequestCode.SEND_MESSAGE else _READ_V2(ext)
        checked = self._msg_check(conn, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        topic_config = checked
        queue_id = header.queueId if header.queueId >= 0 else random.randrange(max(1, topic_config.writeQueueNums))
        if request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            result = self._send_batch(conn, request, header, topic_config, queue_id)
        else:
            result = self._send_single(conn, request, header, topic_config, queue_id)
        unwritten = self.broker.topic_config_manager.unwritten
        if unwritten:
            # Its own topic, a DLQ or a transaction's half topic may have just been created for
            # it: answered once every topic created so far is written (they are written together).
            return self._answer_once_written(result, list(unwritten))
        return result

    async def _answer_once_written(self, result: ProcessorResult, topics: list[str]) -> RemotingCommand | None:
        await self.broker.topic_config_manager.written(*topics)
        if result is None or isinstance(result, RemotingCommand):
            return result
        return await result

    def when_stored(self, responses: list[RemotingCommand], offset: int) -> list[asyncio.Future[RemotingCommand]]:
        """Stored sends' answers, each once the log is flushed (SYNC_FLUSH) and on the slave
        (SYNC_MASTER) to ``offset``, or carrying the code saying which did not happen. One wait
        serves the whole run and one callback answers it: no coroutine or task per send."""
        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future[RemotingCommand]] = [loop.create_future() for _ in responses]

        def settle(stored: asyncio.Future[PutMessageStatus]) -> None:
            status = PutMessageStatus.SERVICE_NOT_AVAILABLE if stored.cancelled() else stored.result()
            code = None if status is PutMessageStatus.PUT_OK else _STATUS_TO_CODE[status][0]
            for response, answer in zip(responses, answers, strict=True):
                if code is not None:
                    response.code = code
                if not answer.done():
                    answer.set_result(response)

        self.broker.message_store.stored_future(offset).add_done_callback(settle)
        return answers

    def _msg_check(self, conn: RemotingConnection, request: RemotingCommand,
                   header: SendMessageRequestHeader) -> TopicConfig | RemotingCommand:
        broker = self.broker
        cfg = broker.broker_config
        if not cfg.brokerPermission & PermName.PERM_WRITE:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{cfg.brokerIP1}] sending message is forbidden")
        if header.topic not in self.valid_topic_names:
            problem = validate_topic(header.topic)
            if problem:
                return request.response(ResponseCode.SYSTEM_ERROR, problem)
            if header.topic in NOT_ALLOWED_SEND_TOPICS:
                return request.response(ResponseCode.NO_PERMISSION,
                                        f"Sending message to topic[{header.topic}] is forbidden.")
            if len(self.valid_topic_names) < 65536:
                self.valid_topic_names.add(sys.intern(header.topic))  # as the store's tables key it
        topics = broker.topic_config_manager
        topic_config = topics.select_topic_config(header.topic)
        if topic_config is None:
            if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                topic_config = topics.create_topic_in_send_message_back_method(
                    header.topic, 1, PermName.PERM_READ | PermName.PERM_WRITE)
            else:
                topic_config = topics.create_topic_in_send_message_method(
                    header.topic, header.defaultTopic, header.defaultTopicQueueNums)
            if topic_config is None:
                return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                        f"topic[{header.topic}] not exist, apply first please! "
                                        "(autoCreateTopicEnable is off or the default topic does not allow it)")
        if not topic_config.perm & PermName.PERM_WRITE:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the topic[{header.topic}] sending message is forbidden")
        valid = max(topic_config.readQueueNums, topic_config.writeQueueNums)
        if header.queueId >= valid:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"request queueId[{header.queueId}] is illegal, {topic_config} Producer: "
                                    f"{conn.remote_addr}")
        return topic_config

    def _inner(self, conn: RemotingConnection, topic: str, queue_id: int, body: bytes, flag: int, properties: str,
               sys_flag: int, born_timestamp: int, reconsume_times: int,
               topic_config: TopicConfig) -> MessageExtBrokerInner:
        if topic_config.topicFilterType == TopicFilterType.MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        return MessageExtBrokerInner(
            topic=topic, body=body, queue_id=queue_id, flag=flag, properties_string=properties,
            tags_code=tags_string_to_tags_code(find_property(properties, MessageConst.TAGS)), sys_flag=sys_flag,
            born_timestamp=born_timestamp, born_host=self.born_host(conn.remote_addr),
            store_host=self.broker.store_host, reconsume_times=reconsume_times)

    def born_host(self, addr: str) -> tuple[str, int]:
        host = self.born_hosts.get(addr)
        if host is None:
            if len(self.born_hosts) >= 65536:
                self.born_hosts.clear()
            host = self.born_hosts[addr] = _parse_host(addr)
        return host

    def _send_single(self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader,
                     topic_config: TopicConfig, queue_id: int) -> ProcessorResult:
        plain = None if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else plain_properties(
            header.properties or "", self.cluster_entries(self.broker.broker_config.brokerClusterName))
        if plain is None:
            return self._send_single_parsed(conn, request, header, topic_config, queue_id)
        properties, wait = plain
        return self._store(request, self._inner(conn, header.topic, queue_id, request.body or b"", header.flag,
                                                properties, header.sysFlag, header.bornTimestamp,
                                                header.reconsumeTimes or 0, topic_config), wait, queue_id)

    def _send_single_parsed(self, conn: RemotingConnection, request: RemotingCommand,
                            header: SendMessageRequestHeader, topic_config: TopicConfig,
                            queue_id: int) -> ProcessorResult:
        """A send whose properties change what is stored or where: a retry topic's (maybe bound
        for the DLQ), a delayed, a transactional one, or one that names CLUSTER itself."""
        props = string_to_properties(header.properties or "")
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            moved = self._handle_retry_and_dlq(request, header, props)
            if isinstance(moved, RemotingCommand):
                return moved
            if moved is not None:
                topic, queue_id = moved, 0
        transactional = props.get(MessageConst.TRANSACTION_PREPARED) == "true"
        if transactional and self.broker.broker_config.rejectTransactionMessage:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{self.broker.broker_config.brokerIP1}] sending transaction message "
                                    "is forbidden")
        wait = props.pop(MessageConst.WAIT_STORE_MSG_OK, "true") != "false"
        answered_queue_id = queue_id
        if MessageConst.DELAY_TIME_LEVEL in props and header.sysFlag & TRANSACTION_ROLLBACK_TYPE in _DELAYABLE:
            parked = self._park_delayed(request, props, topic, queue_id)
            if isinstance(parked, RemotingCommand):
                return parked
            topic, queue_id = parked
        props[MessageConst.CLUSTER] = self.broker.broker_config.brokerClusterName
        inner = self._inner(conn, topic, queue_id, request.body or b"", header.flag, properties_to_string(props),
                            header.sysFlag, header.bornTimestamp, header.reconsumeTimes or 0, topic_config)
        if transactional:
            self.broker.transaction_bridge.prepare_half_message(inner, props)
        return self._store(request, inner, wait, answered_queue_id)

    def _store(self, request: RemotingCommand, inner: MessageExtBrokerInner, wait: bool,
               queue_id: int) -> ProcessorResult:
        store = self.broker.message_store
        result = store.append_message(inner)
        if wait and store.sync_put:
            return self._synced_response(request, result, queue_id)
        return self.response(request, result, queue_id)

    async def _synced_response(self, request: RemotingCommand, result: PutMessageResult,
                               queue_id: int) -> RemotingCommand:
        return self.response(request, await self.broker.message_store.synced(result), queue_id)

    def _park_delayed(self, request: RemotingCommand, props: dict[str, str], topic: str,
                      queue_id: int) -> tuple[str, int] | RemotingCommand:
        schedule = self.broker.schedule_message_service
        try:
            level = schedule.delay_level_of(props)
        except DelayLevelError as exc:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        return schedule.park(props, topic, queue_id, level) if level else (topic, queue_id)

    def _handle_retry_and_dlq(self, request: RemotingCommand, header: SendMessageRequestHeader,
                              props: dict[str, str]) -> str | RemotingCommand | None:
        """A direct send to ``%RETRY%group`` past the group's max reconsume times goes to its DLQ."""
        group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        group_config = self.broker.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group not exist, {group}")
        max_times = group_config.retryMaxTimes
        if request.version >= V3_4_9 and header.maxReconsumeTimes is not None:
            max_times = header.maxReconsumeTimes
        if (header.reconsumeTimes or 0) < max_times:
            return None
        dlq = dlq_topic(group)
        self.broker.topic_config_manager.create_topic_in_send_message_back_method(dlq, DLQ_NUMS_PER_GROUP, DLQ_PERM)
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        log.info("message reconsumed %s times, moved to %s", header.reconsumeTimes, dlq)
        dlq_messages = self.broker.stats.dlq_messages
        key = (header.producerGroup, header.topic)  # as Java labels it: the sender's group and topic
        dlq_messages[key] = dlq_messages.get(key, 0) + 1
        return dlq

    def _send_batch(self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader,
                    topic_config: TopicConfig, queue_id: int) -> ProcessorResult:
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or header.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            return request.response(ResponseCode.MESSAGE_ILLEGAL,
                                    f"batch request does not support retry group {header.topic}")
        body = request.body or b""
        max_size = self.broker.message_store.config.maxMessageSize
        if len(body) > max_size:  # Java's batch encoder: the whole batch within maxMessageSize
            return request.response(ResponseCode.MESSAGE_ILLEGAL,
                                    f"message size exceeded: the batch body is {len(body)} bytes, over maxMessageSize "
                                    f"{max_size}")
        try:
            batch = self._batch(conn, header, queue_id, body, topic_config)
        except RecordError as exc:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        store = self.broker.message_store
        result = store.append_messages(batch)
        if store.sync_put:
            return self._synced_response(request, result, queue_id)
        return self.response(request, result, queue_id)

    def _batch(self, conn: RemotingConnection, header: SendMessageRequestHeader, queue_id: int, body: bytes,
               topic_config: TopicConfig) -> MessageExtBatch:
        """The store's batch for a SEND_BATCH_MESSAGE body, its records built, or RecordError saying why not.

        An entry's properties are stored as sent, followed by the header's properties it lacks
        and CLUSTER (Java's batch encoder appends the batch's properties the same way), all as
        bytes: only the names the broker needs are looked up, nothing is decoded or parsed
        into a dict and back (a batch is most of a broker's per-message work). The body is
        walked once (split_batch_merged) into the store's records, each distinct properties merged
        once (entries differing only by their UNIQ_KEY's value, once for them all); what the
        store refuses of them (a body too large, properties holding NUL or too long) it answers. What is wrong
        is answered in this order: the body's structure, an empty batch, the header, an entry's
        properties."""
        refused: str | None = None
        if header.sysFlag & TRANSACTION_ROLLBACK_TYPE:  # Java's asyncPutMessages: not-type batches only
            refused = "batch messages cannot be delayed or transactional"
        key = (header.properties or "", self.broker.broker_config.brokerClusterName)
        merging = self._batch_mergings.get(key)
        if merging is None:
            merging = self._batch_merging(*key)
        delay_refused, fill, cluster, known, keyed = merging
        refused = refused or delay_refused
        tags_codes = self._raw_tags_codes

        def merge(sent: bytes) -> tuple[bytes, int]:
            """An entry's properties as stored, and its tags' hash (of a refused batch: as sent,
            its entries walked only for their structure); what it gave for the same properties
            under the same header properties and cluster name, when it gave it before."""
            if refused is not None:
                return sent, 0
            done = known.get(sent)
            if done is not None:
                return done
            props = sent
            if not props.isascii():
                try:
                    props.decode()
                except UnicodeDecodeError:
                    raise RecordError("the batch body is malformed: entry properties are not UTF-8") from None
            # A name the properties do not hold is not looked for (the usual case: one search).
            if ((_RAW_DELAY[1:] in props and find_raw_property(props, _RAW_DELAY))
                    or (_RAW_TRANSACTION[1:] in props and find_raw_property(props, _RAW_TRANSACTION) == b"true")):
                raise RecordError("batch messages cannot be delayed or transactional")
            if _RAW_CLUSTER[1:] in props and find_raw_property(props, _RAW_CLUSTER):  # CLUSTER is the broker's to set
                own = string_to_properties(props.decode())
                own.pop(MessageConst.CLUSTER)
                props = properties_to_string(own).encode()
            appended = _RAW_SEPARATOR.join([pair for prefix, pair in fill if not find_raw_property(props, prefix)]
                                           + [cluster]) if fill else cluster
            # As Java: one separator between the entry's own and the appended, never two.
            stored = props + _RAW_SEPARATOR + appended if props and not props.endswith(_RAW_SEPARATOR) \
                else props + appended
            raw_tags = find_raw_property(stored, _RAW_TAGS)
            code = tags_codes.get(raw_tags)
            done = stored, self._tags_code(raw_tags) if code is None else code
            # Properties holding a UNIQ_KEY are an entry's own: the walk keeps them without its value.
            if len(sent) <= _MERGED_MAX_LENGTH and sent.find(_RAW_UNIQ_KEY) < 0:
                if len(known) >= _MERGED_KEPT:
                    known.clear()
                known[sent] = done
            return done

        sys_flag = header.sysFlag | (MULTI_TAGS_FLAG if topic_config.topicFilterType == TopicFilterType.MULTI_TAG
                                     else 0)
        batch = MessageExtBatch(topic=header.topic, queue_id=queue_id, entries=[], sys_flag=sys_flag,
                                born_timestamp=header.bornTimestamp, born_host=self.born_host(conn.remote_addr),
                                store_host=self.broker.store_host, reconsume_times=header.reconsumeTimes or 0)
        # The walk builds the store's records as it reads the entries, where they would go now.
        maker = self.broker.message_store.commit_log.batch_maker(batch)
        try:
            if refused is None:  # a refused batch's merge gives what no other batch's would
                if len(keyed) >= _KEYED_KEPT:
                    keyed.clear()
                records, bad_entry = split_batch_merged(body, merge, maker, keyed)
            else:
                records, bad_entry = split_batch_merged(body, merge, maker)
        except RecordError as exc:
            raise RecordError(f"the batch body is malformed: {exc}") from None
        if not records[1]:
            raise RecordError("the batch is empty")
        if refused is not None:
            raise RecordError(refused)
        if bad_entry is not None:
            raise bad_entry
        batch.maker, batch.records = maker, records
        return batch

    def _batch_merging(self, properties: str, cluster_name: str) -> _BatchMerging:
        """What a batch's header ``properties`` make of its entries' properties, kept: the
        refusal their delay level makes, if any; the pairs an entry lacking them gets, each
        with the prefix it is looked for by; CLUSTER as appended; the merges done so far.
        An entry's own properties are stored as sent, followed by the header's properties it
        lacks and CLUSTER, as Java's batch encoder appends the batch's properties."""
        header_props = string_to_properties(properties)
        refused: str | None = None
        delay = header_props.get(MessageConst.DELAY_TIME_LEVEL)
        if delay is not None:  # the batch's own level, read as Java's getDelayTimeLevel reads it
            try:
                level = parse_int(delay)
            except ValueError:
                refused = f"the delay level (property DELAY) {shown(delay)} is not an int"
            else:
                if level > 0:
                    refused = "batch messages cannot be delayed or transactional"
        header_props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
        header_props.pop(MessageConst.CLUSTER, None)
        fill = [(raw_property_prefix(k), f"{k}{NAME_VALUE_SEPARATOR}{v}".encode()) for k, v in header_props.items()]
        cluster = f"{MessageConst.CLUSTER}{NAME_VALUE_SEPARATOR}{cluster_name}".encode()
        if len(self._batch_mergings) >= _MERGINGS_KEPT:
            self._batch_mergings.clear()
        merging = self._batch_mergings[properties, cluster_name] = (refused, fill, cluster, {}, {})
        return merging

    def _tags_code(self, raw_tags: bytes) -> int:
        code = tags_string_to_tags_code(raw_tags.decode()) if raw_tags else 0
        if len(self._raw_tags_codes) >= 65536:
            self._raw_tags_codes.clear()
        self._raw_tags_codes[raw_tags] = code
        return code

    def response(self, request: RemotingCommand, result: PutMessageResult, queue_id: int) -> RemotingCommand:
        """A put's answer: RocketMQ's code for its status, and for a stored message its id,
        queue and queue offset; the broker's put statistics counted."""
        code, remark = _STATUS_TO_CODE[result.status]
        cfg = self.broker.broker_config
        append = result.append_result
        stats = self.broker.stats
        if code in _STORED_CODES and append is not None:
            stats.put_messages += append.msg_num
            stats.put_bytes += append.wrote_bytes
            fields = send_response_fields(cfg.regionId, cfg.traceOn, append.msg_id, queue_id, append.logics_offset)
        else:
            stats.put_failed_times += 1
            if result.remark:
                remark = f"{remark or result.status.value} ({result.remark})"
            fields = send_response_fields(cfg.regionId, cfg.traceOn)
        return request.response(code, remark, fields)
