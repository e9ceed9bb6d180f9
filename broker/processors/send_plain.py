"""The plain-send run: SEND_MESSAGE_V2 sends read straight from their fields (a hot module).

A plain send -- one message, V2, to a known writable topic and a valid queue, with no delay, no
transaction and no CLUSTER of its own in its properties -- is most of a broker's traffic. Here it
is read without the typed header, its properties handled as a string, and a read's worth of them
stored in one ``append_run``. Anything else, and every malformed field, ends the run and goes to
SendMessageProcessor's full path (``send.py``), which owns every check's answer.

So this module is a second way of doing what the full path does, kept only for speed
(docs/hot-modules.md gives the figure). What it stores and answers must be what the full path
stores and answers: tests/unit/test_send_plain.py pins it there, by sending the same fields down
both paths and comparing the records and answers (properties, numbers at and past Java's
bounds, a run broken by unusual sends, a run too large for one file, a synced run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.header import INT32_MAX, INT64_MAX
from rocketmq_py.remoting.processor import ProcessorResult
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeaderV2, send_response_fields
from rocketmq_py.remoting.protocol.message import (
    MULTI_TAGS_FLAG,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    find_property,
    tags_string_to_tags_code,
)
from rocketmq_py.remoting.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, PermName, TopicFilterType
from rocketmq_py.store.commit_log import MAX_PROPERTIES_LENGTH, MessageExtBrokerInner, RunEntry
from rocketmq_py.store.message_store import PutMessageStatus

if TYPE_CHECKING:
    from rocketmq_py.broker.processors.send import SendMessageProcessor
    from rocketmq_py.remoting.connection import RemotingConnection

# Enum members read from their classes cost 0.1 µs each, and every send reads these.
_PUT_OK = PutMessageStatus.PUT_OK
_SUCCESS = ResponseCode.SUCCESS
_SEND_MESSAGE_V2 = RequestCode.SEND_MESSAGE_V2
_PERM_WRITE = PermName.PERM_WRITE
_MULTI_TAG = TopicFilterType.MULTI_TAG
_TAGS = MessageConst.TAGS
# The V2 header's keys, as SendMessageRequestHeaderV2 declares them.
(_PRODUCER_GROUP, _TOPIC, _DEFAULT_TOPIC, _DEFAULT_TOPIC_QUEUE_NUMS, _QUEUE_ID, _SYS_FLAG, _BORN_TIMESTAMP, _FLAG,
 _PROPERTIES, _RECONSUME_TIMES, _BATCH, _MAX_RECONSUME_TIMES) = map(SendMessageRequestHeaderV2.wire_key, (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag",
    "properties", "reconsumeTimes", "batch", "maxReconsumeTimes"))

_WAIT_ENTRY = MessageConst.WAIT_STORE_MSG_OK + NAME_VALUE_SEPARATOR
# Names a plain single send's properties never hold: each sends it down the parsed path.
_PARSED_NAMES = tuple(name + NAME_VALUE_SEPARATOR for name in (
    MessageConst.DELAY_TIME_LEVEL, MessageConst.TRANSACTION_PREPARED, MessageConst.CLUSTER))


def plain_properties(text: str, cluster: tuple[str, str, str]) -> tuple[str, bool] | None:
    """What a plain message's properties are stored as -- as sent, less WAIT, plus CLUSTER --
    and its WAIT, by string operations alone; None when they must be parsed: a delay, a
    transaction or a CLUSTER of its own is named (maybe only inside a value: then parsing
    decides), or WAIT is named twice or unusually. Parsing into a dict and joining back was a
    tenth of the broker's cost of a send."""
    for name in _PARSED_NAMES:
        if name in text:
            return None
    wait = True
    i = text.find(_WAIT_ENTRY)
    if i >= 0:
        if i and text[i - 1] != PROPERTY_SEPARATOR:
            return None
        j = text.find(PROPERTY_SEPARATOR, i)
        if j < 0:
            wait = text[i + len(_WAIT_ENTRY):] != "false"
            text = text[:i - 1] if i else ""
        else:
            wait = text[i + len(_WAIT_ENTRY):j] != "false"
            text = text[:i] + text[j + 1:]
        if _WAIT_ENTRY in text:
            return None
    _, after_separator, alone = cluster
    return (text + after_separator if text and not text.endswith(PROPERTY_SEPARATOR) else text + alone), wait


def plain_topic(processor: SendMessageProcessor, topic: str) -> tuple[str, int, int] | None:
    """What plain sends read of ``topic``'s config -- its name, its queue count, the MULTI_TAGS
    flag of its filter type -- noted in ``processor.plain_topics`` until a topic config changes
    (its data version); None when its sends are not plain (no config, an unchecked name, not
    writable, a retry topic, whose send may go to the DLQ, a topic whose table write is under way,
    which the full path waits for: it leaves that only by a change, the table's next version).

    Sends spread over many topics read a different config for almost every send: a config's
    fields are attributes of a pydantic model, read through its ``__getattr__`` hook by the
    interpreter's slow path, and its objects are out of the caches; one tuple is neither. The name
    is the config's own, the interned string the store's tables are keyed by
    (TopicConfig.topicName): their look-ups then match it by identity, where the request's new
    string would be compared with each table's key."""
    manager = processor.broker.topic_config_manager
    config = manager.table.get(topic)
    if config is None:
        return None
    name = config.topicName
    if (name != topic or name not in processor.valid_topic_names or not config.perm & _PERM_WRITE
            or name.startswith(RETRY_GROUP_TOPIC_PREFIX) or name in manager.unwritten):
        return None
    facts = name, max(config.readQueueNums, config.writeQueueNums), \
        MULTI_TAGS_FLAG if config.topicFilterType == _MULTI_TAG else 0
    if len(processor.plain_topics) < 65536:
        processor.plain_topics[name] = facts
    return facts


def store_plain_sends(processor: SendMessageProcessor, conn: RemotingConnection,
                      requests: list[RemotingCommand]) -> list[ProcessorResult]:
    """The leading plain sends of ``requests``, stored in one ``append_run``, with their answers.

    Read straight from the header fields: building the typed header cost a tenth of the
    broker's time per send. The first send that is anything else ends the run, including
    every malformed header: the full path then checks it and answers what is wrong with it.
    So the checks here only choose the path; the full path owns every error remark."""
    if not requests or requests[0].code != _SEND_MESSAGE_V2:
        # None taken, known before the broker's settings are read: a batch, or another code
        # (every request of the send processor's codes asks here first, twice when a read
        # brings several of one code: once for the run, once by itself).
        return []
    broker = processor.broker
    cfg = broker.broker_config
    if not cfg.brokerPermission & _PERM_WRITE:
        return []
    cluster = processor.cluster
    if cluster[0] != cfg.brokerClusterName:
        cluster = processor.cluster_entries(cfg.brokerClusterName)
    store = broker.message_store
    max_body = store.config.maxMessageSize
    version = broker.topic_config_manager.data_version
    stamp = version.counter, version.timestamp
    plain_topics = processor.plain_topics
    if processor.plain_topics_version != stamp:  # a topic config changed: what was read of them may not hold
        plain_topics.clear()
        processor.plain_topics_version = stamp
    entries: list[RunEntry] = []
    waits: list[bool] = []
    last_topic = None
    name = ""
    queue_limit = multi_tags = 0
    for request in requests:
        ext = request.ext_fields
        if request.code != _SEND_MESSAGE_V2 or ext is None:
            break
        topic = ext.get(_TOPIC, "")
        if topic != last_topic:
            facts = plain_topics.get(topic) or plain_topic(processor, topic)
            if facts is None:
                break
            name, queue_limit, multi_tags = facts
            last_topic = topic
        batch = ext.get(_BATCH)
        # A max reconsume times comes only with retry topics (Java's and our SDK's producers
        # send reconsume times with every send: 0).
        if ((batch is not None and batch != "false") or _MAX_RECONSUME_TIMES in ext or _PRODUCER_GROUP not in ext
                or _DEFAULT_TOPIC not in ext):
            break
        plain = plain_properties(ext.get(_PROPERTIES) or "", cluster)
        if plain is None:
            break
        try:
            # Plain digits only, each within its Java type: int() also takes a sign, spaces
            # and "_", and any size, where Java's parseInt/parseLong refuse some of those and
            # the store's record cannot hold the rest. Anything else is the typed header's
            # to read (a negative queue id or flag is legal there) or to refuse.
            raw_queues, raw_queue_id, raw_sys_flag, raw_born, raw_flag = \
                ext[_DEFAULT_TOPIC_QUEUE_NUMS], ext[_QUEUE_ID], ext[_SYS_FLAG], ext[_BORN_TIMESTAMP], ext[_FLAG]
            raw_reconsume = ext.get(_RECONSUME_TIMES, "0")
            if not (raw_queues.isdigit() and raw_queue_id.isdigit() and raw_sys_flag.isdigit()
                    and raw_born.isdigit() and raw_flag.isdigit() and raw_reconsume.isdigit()):
                break
            # defaultTopicQueueNums is unused here, but the typed header requires it.
            queues = int(raw_queues)
            queue_id = int(raw_queue_id)
            sys_flag = int(raw_sys_flag)
            born_timestamp = int(raw_born)
            flag = int(raw_flag)
            reconsume_times = int(raw_reconsume)
        except (KeyError, ValueError):  # a missing field, or a digit int() does not read ("²")
            break
        if (queues > INT32_MAX or sys_flag > INT32_MAX or flag > INT32_MAX or reconsume_times > INT32_MAX
                or born_timestamp > INT64_MAX):
            break
        properties, wait = plain
        body = request.body or b""
        raw_properties = properties.encode()
        if (not 0 <= queue_id < queue_limit or len(body) > max_body
                or len(raw_properties) > MAX_PROPERTIES_LENGTH):
            break
        entries.append((name, queue_id, body, flag, raw_properties,
                        tags_string_to_tags_code(find_property(properties, _TAGS)), sys_flag | multi_tags,
                        born_timestamp, reconsume_times, 0))
        waits.append(wait)
    if not entries:
        return []
    born_host = processor.born_hosts.get(conn.remote_addr) or processor.born_host(conn.remote_addr)
    if len(entries) == 1:
        # A lone send (one in flight) is stored by the single put's own record builder,
        # which is 1.4 µs cheaper than a run of one.
        topic, queue_id, body, flag, raw_properties, tags_code, sys_flag, born_timestamp, reconsume_times, _ = \
            entries[0]
        # Positionally, in the dataclass's field order: keywords cost twice as much, every send.
        result = store.append_message(MessageExtBrokerInner(
            topic, body, queue_id, flag, raw_properties.decode(), tags_code, sys_flag, born_timestamp, born_host,
            broker.store_host, reconsume_times))
    else:
        result = store.append_run(entries, born_host, broker.store_host)
    append = result.append_result
    if result.status is not _PUT_OK or append is None:
        # Nothing was stored. A run is refused whole (one too large for a file, a full disk):
        # its sends are then stored one by one, and each answered for itself.
        return [] if len(entries) > 1 else [processor.response(requests[0], result, entries[0][1])]
    stats = broker.stats
    stats.put_messages += append.msg_num
    stats.put_bytes += append.wrote_bytes
    region, trace_on = cfg.regionId, cfg.traceOn
    host = append.host_hex
    synced_to = append.wrote_offset + append.wrote_bytes if store.sync_put else 0
    answers: list[ProcessorResult] = []
    waiting: list[RemotingCommand] = []
    waiting_at: list[int] = []
    for request, entry, offset, queue_offset, wait in zip(requests, entries, append.offsets,
                                                           append.queue_offsets, waits, strict=False):
        response = request.response(_SUCCESS, None, send_response_fields(
            region, trace_on, f"{host}{offset:016X}", entry[1], queue_offset))
        if synced_to and wait:
            waiting.append(response)
            waiting_at.append(len(answers))
        answers.append(response)
    if waiting:
        # One wait for the run's synced sends, each answer replaced by its future.
        for at, answer in zip(waiting_at, processor.when_stored(waiting, synced_to), strict=True):
            answers[at] = answer
    return answers
