"""The broker's plain sends (broker/processors/send_plain.py): read from the V2 fields, properties
handled as a string; what they store must be what the full path (typed header, parsed
properties) stores. The differential test that pins the fast path to the full path."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rocketmq_py.broker.processors.send as send
from rocketmq_py.broker.processors.send import SendMessageProcessor
from rocketmq_py.broker.processors.send_plain import plain_properties
from rocketmq_py.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.frame import FrameDecoder, encode_frame
from rocketmq_py.remoting.header import HeaderError
from rocketmq_py.remoting.processor import ProcessorTable
from rocketmq_py.remoting.protocol.message import MessageExt, decode_offset_msg_id, decode_record, string_to_properties
from rocketmq_py.remoting.protocol.topic import PermName, TopicConfig
from rocketmq_py.store.config import FlushDiskType
from tests.unit.send_helpers import send_processor, unconnected

CLUSTER = ("C1", "\x02CLUSTER\x01C1", "CLUSTER\x01C1")


def _parsed(text: str) -> tuple[dict[str, str], bool]:
    """What the parsed path stores: the properties less WAIT, plus CLUSTER; and the WAIT."""
    props = string_to_properties(text)
    wait = props.pop("WAIT", "true") != "false"
    props["CLUSTER"] = "C1"
    return props, wait


@pytest.mark.parametrize("text", [
    "",
    "WAIT\x01true",
    "WAIT\x01false",
    "TAGS\x01a\x02WAIT\x01true",
    "WAIT\x01false\x02TAGS\x01a",
    "TAGS\x01a\x02WAIT\x01false\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U",
    "TAGS\x01a\x02",
    "TAGS\x01a\x02WAIT\x01false\x02",
    "WAIT\x01\x02TAGS\x01a",
    "TAGS\x01caf\u00e9",
])
def test_plain_properties_store_what_parsing_would(text: str) -> None:
    plain = plain_properties(text, CLUSTER)
    assert plain is not None
    stored, wait = plain
    assert (string_to_properties(stored), wait) == _parsed(text)
    assert stored.endswith("CLUSTER\x01C1") and "WAIT\x01" not in stored
    assert "\x02\x02" not in stored


@pytest.mark.parametrize("text", [
    "DELAY\x013",                          # parked in the schedule topic
    "TRAN_MSG\x01true",                    # a half message
    "CLUSTER\x01theirs",                   # replaced by the broker's
    "TAGS\x01DELAY\x01",                   # a name inside a value: parsing decides
    "WAIT\x01true\x02WAIT\x01false",       # named twice
    "XWAIT\x01true",                       # not at an entry's start
])
def test_properties_that_change_what_is_stored_go_to_the_parsed_path(text: str) -> None:
    assert plain_properties(text, CLUSTER) is None


def _recorded(reads: list[dict[str, str]], ext: dict[str, str], read: Any) -> Any:
    """``read(ext)``, with ``ext`` noted in ``reads``: which sends took the plain path."""
    reads.append(ext)
    return read(ext)


@pytest.fixture
async def processor(tmp_path: Any) -> AsyncIterator[SendMessageProcessor]:
    async with send_processor(tmp_path) as processor:
        yield processor


# As Java's producer and our SDK send it: reconsume times, unit mode and the batch flag always.
SDK_FIELDS = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000123", "h": "3",
              "i": "TAGS\x01a\x02WAIT\x01true\x02UNIQ_KEY\x01U1", "j": "0", "k": "false", "m": "false", "n": "b"}


def _send(processor: SendMessageProcessor, ext: dict[str, str]) -> RemotingCommand:
    response = processor.process_request(unconnected(), RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, dict(ext), b"body"))
    assert isinstance(response, RemotingCommand)
    return response


def _stored_anyway(processor: SendMessageProcessor, response: RemotingCommand) -> MessageExt:
    """The record an answer's msgId names, whatever the answer's code."""
    _, offset = decode_offset_msg_id((response.ext_fields or {})["msgId"])
    data = processor.broker.message_store.look_message_by_offset(offset)
    assert data is not None
    return decode_record(data)


def _stored(processor: SendMessageProcessor, response: RemotingCommand) -> MessageExt:
    assert response.code == ResponseCode.SUCCESS, response.remark
    return _stored_anyway(processor, response)


async def test_sdk_shaped_sends_skip_the_typed_header_and_store_what_the_full_path_does(
        processor: SendMessageProcessor, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[dict[str, str]] = []
    read_v2 = send._READ_V2

    def counted(ext: dict[str, str]) -> Any:
        reads.append(ext)
        return read_v2(ext)

    monkeypatch.setattr(send, "_READ_V2", counted)
    monkeypatch.setattr(processor, "process_requests", lambda *args: [])
    full = _stored(processor, _send(processor, SDK_FIELDS))
    assert len(reads) == 1
    monkeypatch.undo()
    monkeypatch.setattr(send, "_READ_V2", counted)
    plain = _stored(processor, _send(processor, SDK_FIELDS))
    assert len(reads) == 1, "the plain path read no typed header"
    assert plain.queue_offset == full.queue_offset + 1
    for field in ("topic", "queue_id", "flag", "sys_flag", "born_timestamp", "born_host", "reconsume_times", "body",
                  "properties"):
        assert getattr(plain, field) == getattr(full, field), field
    assert plain.properties == {"TAGS": "a", "UNIQ_KEY": "U1", "CLUSTER": "C1"}


@pytest.mark.parametrize(("change", "answer"), [
    ({"e": "9"}, ResponseCode.SYSTEM_ERROR),                # a queue the topic does not have
    ({"l": "3"}, ResponseCode.SUCCESS),                     # max reconsume times: a retry's header
    ({"i": "TAGS\x01a\x02CLUSTER\x01x"}, ResponseCode.SUCCESS),  # its own CLUSTER: the parsed path
])
async def test_anything_unusual_goes_to_the_full_path(processor: SendMessageProcessor, monkeypatch: pytest.MonkeyPatch,
                                                      change: dict[str, str], answer: int) -> None:
    _send(processor, SDK_FIELDS)  # the topic's first send, which validates its name
    reads: list[dict[str, str]] = []
    read_v2 = send._READ_V2
    monkeypatch.setattr(send, "_READ_V2", lambda ext: _recorded(reads, ext, read_v2))
    response = _send(processor, {**SDK_FIELDS, **change})
    assert response.code == answer, response.remark
    assert len(reads) == 1


async def test_a_malformed_field_is_named_by_the_full_path(processor: SendMessageProcessor) -> None:
    _send(processor, SDK_FIELDS)
    # The processor table answers a HeaderError as SYSTEM_ERROR with this remark.
    with pytest.raises(HeaderError, match="<j> is not a valid int"):
        _send(processor, {**SDK_FIELDS, "j": ""})


class _Transport:
    """A connection's transport that keeps what is written."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def get_extra_info(self, name: str) -> tuple[str, int]:
        return ("10.0.0.7", 5555)

    def is_closing(self) -> bool:
        return False


def _frame(ext: dict[str, str], body: bytes = b"body") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(ext), body, serialize_type=SerializeType.MSGPACK)


def _connection(processor: SendMessageProcessor) -> tuple[RemotingConnection, _Transport]:
    """A connection dispatching to ``processor``, after a first send that validated the topic."""
    table = ProcessorTable()
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        table.register(code, processor)
    conn = RemotingConnection(table)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(encode_frame(_frame(SDK_FIELDS, b"first")))
    conn.flush()
    transport.data.clear()
    return conn, transport


async def test_a_read_of_sends_is_stored_in_arrival_order_and_each_answered(
        processor: SendMessageProcessor, monkeypatch: pytest.MonkeyPatch) -> None:
    conn, transport = _connection(processor)
    processor.broker.message_store.config.maxMessageSize = 1024
    requests = [
        _frame({**SDK_FIELDS, "e": "1"}, b"m0"),
        _frame({**SDK_FIELDS, "e": "1"}, b"m1"),
        _frame({**SDK_FIELDS, "e": "1", "l": "3"}, b"m2"),              # full path, stored
        _frame({**SDK_FIELDS, "e": "1", "i": "TAGS\x01c"}, b"m3"),      # a run of one: the next ends it
        _frame({**SDK_FIELDS, "e": "9", "i": "TAGS\x01d"}, b"bad"),     # full path: no queue 9
        _frame({**SDK_FIELDS, "e": "1"}, b"x" * 2000),                  # full path, refused: too large
        _frame({**SDK_FIELDS, "e": "2"}, b"m6"),
        _frame({**SDK_FIELDS, "e": "1", "i": "TAGS\x01b"}, b"m7"),
    ]
    reads: list[dict[str, str]] = []
    read_v2 = send._READ_V2
    monkeypatch.setattr(send, "_READ_V2", lambda ext: _recorded(reads, ext, read_v2))
    conn.data_received(b"".join(encode_frame(r) for r in requests))
    conn.flush()
    assert len(reads) == 3, "only the three unusual sends took the full path"
    answers = FrameDecoder().feed(bytes(transport.data))
    assert [a.opaque for a in answers] == [r.opaque for r in requests]
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 4 + [
        ResponseCode.SYSTEM_ERROR, ResponseCode.MESSAGE_ILLEGAL] + [ResponseCode.SUCCESS] * 2
    stored = [(a, _stored(processor, a)) for a in answers if a.code == ResponseCode.SUCCESS]
    assert [m.body for _, m in stored] == [b"m0", b"m1", b"m2", b"m3", b"m6", b"m7"]
    offsets = [m.commit_log_offset for _, m in stored]
    assert offsets == sorted(offsets), "stored in the order they arrived"
    assert [(m.queue_id, m.queue_offset) for _, m in stored] == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 0), (1, 5)]
    for answer, message in stored:
        ext = answer.ext_fields or {}
        assert (ext["queueId"], ext["queueOffset"]) == (str(message.queue_id), str(message.queue_offset))
    assert stored[3][1].properties == {"TAGS": "c", "CLUSTER": "C1"}, "each send keeps its own properties"
    assert stored[-1][1].properties == {"TAGS": "b", "CLUSTER": "C1"}
    assert processor.broker.message_store.get_max_offset_in_queue("T", 1) == 6


async def test_sends_that_fit_a_file_only_apart_are_stored_one_by_one(processor: SendMessageProcessor) -> None:
    conn, transport = _connection(processor)
    file_size = processor.broker.message_store.config.mappedFileSizeCommitLog
    bodies = [bytes([i]) * (file_size // 3) for i in range(4)]  # any two fill most of a file
    requests = [_frame(SDK_FIELDS, body) for body in bodies]
    conn.data_received(b"".join(encode_frame(r) for r in requests))
    conn.flush()
    answers = FrameDecoder().feed(bytes(transport.data))
    assert [(a.opaque, a.code) for a in answers] == [(r.opaque, ResponseCode.SUCCESS) for r in requests]
    stored = [_stored(processor, a) for a in answers]
    assert [m.body for m in stored] == bodies
    assert [m.queue_offset for m in stored] == [1, 2, 3, 4]


async def test_a_synced_run_is_answered_once_flushed_or_with_flush_disk_timeout(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with send_processor(tmp_path, flushDiskType=FlushDiskType.SYNC_FLUSH) as processor:
        store = processor.broker.message_store
        first = await _answer(processor.process_request(unconnected(), _frame(SDK_FIELDS)))
        assert first.code == ResponseCode.SUCCESS  # the topic's first send, which validates its name
        no_wait = {**SDK_FIELDS, "i": "TAGS\x01a\x02WAIT\x01false"}
        flushed_to = store.group_commit_service.flushed_to
        waits: list[int] = []

        def counted(offset: int) -> asyncio.Future[bool]:
            waits.append(offset)
            return flushed_to(offset)

        monkeypatch.setattr(store.group_commit_service, "flushed_to", counted)
        results = processor.process_requests(unconnected(), [_frame(SDK_FIELDS), _frame(no_wait),
                                                        _frame(SDK_FIELDS)])
        assert waits == [store.commit_log.max_offset], "one wait for the run, to its end"
        assert isinstance(results[1], RemotingCommand), "WAIT=false is answered without waiting"
        assert not isinstance(results[0], RemotingCommand) and not isinstance(results[2], RemotingCommand)
        answers = [await _answer(r) for r in results]
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 3
        assert store.commit_log.queue.flushed_where >= store.commit_log.max_offset

        def never(offset: int) -> asyncio.Future[bool]:
            future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            future.set_result(False)
            return future

        monkeypatch.setattr(store.group_commit_service, "flushed_to", never)
        (late,) = processor.process_requests(unconnected(), [_frame(SDK_FIELDS)])
        answer = await _answer(late)
        assert answer.code == ResponseCode.FLUSH_DISK_TIMEOUT
        assert _stored_anyway(processor, answer).body == b"body", "stored, only not flushed in time"


async def _answer(result: Any) -> RemotingCommand:
    answer = result if isinstance(result, RemotingCommand) else await result
    assert isinstance(answer, RemotingCommand)
    return answer


_NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.builds(lambda b, d: str(b + d), st.sampled_from([2**31, -(2**31), 2**63, -(2**63), 0, 3]), st.integers(-2, 2)),
    st.sampled_from([" 1", "1 ", "+1", "-0", "1_0", "0x1", "", "\u0663", "\uff11", "\u00b2", "1.0"]),
)


async def _outcome(processor: SendMessageProcessor, ext: dict[str, str]) -> tuple[Any, ...]:
    """What a send does: refused (and nothing stored) with the remark, or answered with the code
    and the stored record's fields."""
    before = processor.broker.message_store.commit_log.max_offset
    try:
        response = await _answer(processor.process_request(unconnected(), _frame(ext)))
    except HeaderError as exc:
        assert processor.broker.message_store.commit_log.max_offset == before
        return ("refused", str(exc))
    if response.code != ResponseCode.SUCCESS:
        assert processor.broker.message_store.commit_log.max_offset == before
        return ("answered", response.code)
    m = _stored(processor, response)
    queue = None if int(ext["e"]) < 0 else m.queue_id  # -1: the broker picks the queue
    return ("stored", queue, m.flag, m.sys_flag, m.born_timestamp, m.reconsume_times, m.properties)


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from("defghj"), value=_NUMBERS)
def test_plain_sends_read_numbers_as_the_full_path_does(key: str, value: str) -> None:
    """The plain path reads numbers only where the typed header reads them the same (Java's
    parseInt / parseLong); every other value is the typed header's to read or refuse."""
    async def scenario(root: str) -> None:
        async with send_processor(root) as processor:
            # the first send validates the topic
            await _answer(processor.process_request(unconnected(), _frame(SDK_FIELDS)))
            ext = {**SDK_FIELDS, key: value}
            plain = await _outcome(processor, ext)
            full_path = processor.process_requests
            processor.process_requests = lambda *args: []  # type: ignore[method-assign]
            try:
                full = await _outcome(processor, ext)
            finally:
                processor.process_requests = full_path  # type: ignore[method-assign]
            assert plain == full
            if plain[0] == "refused":
                assert f"<{key}>" in plain[1]

    with tempfile.TemporaryDirectory() as root:
        asyncio.run(scenario(root))


async def test_the_store_keys_a_topic_by_its_configs_interned_name(processor: SendMessageProcessor) -> None:
    """Sends arrive with new strings for their topic; what they store is keyed, in every table a
    put looks the topic up in, by the one object the topic config holds, so those look-ups match
    by identity (sends spread over many topics find the keys out of the caches)."""
    broker = processor.broker
    broker.topic_config_manager.update_topic_config(TopicConfig(topicName="".join(["S", "T"]), readQueueNums=4,
                                                                writeQueueNums=4))
    name = broker.topic_config_manager.table["ST"].topicName
    assert name is sys.intern("ST")
    table = ProcessorTable()
    table.register(RequestCode.SEND_MESSAGE_V2, processor)
    conn = RemotingConnection(table)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    # The first send validates the name (the full path); the rest, a read of four queues, are plain.
    conn.data_received(b"".join(encode_frame(_frame({**SDK_FIELDS, "b": "ST", "e": str(q)}, b"m%d" % q))
                                for q in (0, 0, 1, 2, 3)))
    conn.flush()
    answers = FrameDecoder().feed(bytes(transport.data))
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 5
    assert [_stored(processor, a).topic for a in answers] == ["ST"] * 5
    store = broker.message_store
    assert next(key for key in store.consume_queue_table if key == "ST") is name
    assert sorted(key[1] for key in store.commit_log.topic_queue_table if key[0] == "ST") == [0, 1, 2, 3]
    assert all(key[0] is name for key in store.commit_log.topic_queue_table if key[0] == "ST")
    assert next(key for key in store.commit_log._topic_cache if key == "ST") is name
    assert next(t for t in processor.valid_topic_names if t == "ST") is name


async def test_a_changed_topic_config_holds_for_the_next_plain_send(processor: SendMessageProcessor) -> None:
    """What plain sends read of a config is kept until a topic config changes: the change holds
    for the very next send (fewer queues, then no write permission), the version stamp tells."""
    conn, transport = _connection(processor)
    manager = processor.broker.topic_config_manager
    store = processor.broker.message_store

    def sent(*queues: int) -> list[int]:
        transport.data.clear()
        conn.data_received(b"".join(encode_frame(_frame({**SDK_FIELDS, "e": str(q)})) for q in queues))
        conn.flush()
        return [a.code for a in FrameDecoder().feed(bytes(transport.data))]

    assert sent(3, 2) == [ResponseCode.SUCCESS] * 2
    before = store.get_max_offset_in_queue("T", 3)
    manager.update_topic_config(TopicConfig(topicName="T", readQueueNums=2, writeQueueNums=2))
    codes = sent(3, 1)
    assert codes[0] != ResponseCode.SUCCESS and codes[1] == ResponseCode.SUCCESS
    assert store.get_max_offset_in_queue("T", 3) == before
    manager.update_topic_config(TopicConfig(topicName="T", readQueueNums=2, writeQueueNums=2,
                                            perm=PermName.PERM_READ))
    assert sent(1, 0) == [ResponseCode.NO_PERMISSION] * 2
