"""What a careless user hands the SDK is refused at the call, and the connection lives on.

Every mistake Java's client refuses (client/validators.py) raises MessageValidationError from
the send itself; nothing reaches the broker, and the same producer's next send succeeds on the
very connection it used before. The mistakes are generated, not listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.client import Message, MessageValidationError, MQClientError, Producer, SendStatus
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.sync import BlockingProducer, run_sync
from rocketmq_py.client.validators import RESERVED_PROPERTY_NAMES
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.topic_validator import NOT_ALLOWED_SEND_TOPICS
from tests.integration.daemons import Daemon

TOPIC = "ValidateT"
_LEGAL = "abcXYZ019%|_-"  # some of the characters Java allows, for names too long


def _illegal_name(name: str) -> bool:
    """Not blank, and a character outside ^[%|a-zA-Z0-9_-]+$ (ASCII only, as Java's bit map)."""
    return bool(name.strip()) and re.fullmatch(r"[%|a-zA-Z0-9_-]+", name, re.ASCII) is None


@pytest.fixture(scope="module")
def producer(cluster: tuple[Daemon, Daemon]) -> Iterator[BlockingProducer]:
    p = BlockingProducer("pg_validate", cluster[0].addr, instance_name="validate", send_msg_timeout=5)
    p.start()
    assert p.send(Message(TOPIC, b"first")).send_status is SendStatus.SEND_OK
    yield p
    p.shutdown()


def _connection(p: BlockingProducer, broker: Daemon) -> RemotingConnection:
    instance = p._producer._instance
    assert instance is not None
    conn = instance.remoting._connections[broker.addr]
    assert conn.is_open
    return conn


def _next_send_on(p: BlockingProducer, broker: Daemon, conn: RemotingConnection) -> None:
    """The producer's next send is stored, through the connection it had before the mistake."""
    result = p.send(Message(TOPIC, b"after a mistake"), timeout=5)
    assert result.send_status is SendStatus.SEND_OK and result.queue_offset >= 0
    assert _connection(p, broker) is conn, "the mistake cost the producer its connection"


def _refused_everywhere(p: BlockingProducer, msg: Message) -> MessageValidationError:
    """The mistake raises from send, send_oneway, send_batch and send_async alike."""
    with pytest.raises(MessageValidationError) as info:
        p.send(msg, timeout=5)
    with pytest.raises(MessageValidationError):
        p.send_oneway(msg)
    with pytest.raises(MessageValidationError):
        p.send_batch([msg])

    async def send_async() -> None:
        p._producer.send_async(msg, lambda result, error: None)

    with pytest.raises(MessageValidationError):
        run_sync(send_async())
    return info.value


_not_bytes = st.one_of(st.text(max_size=50), st.integers(), st.floats(), st.booleans(),
                       st.lists(st.integers(0, 255), max_size=8),
                       st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2))
_bad_topics = st.one_of(
    st.text(min_size=1, max_size=30).filter(_illegal_name),
    st.text(alphabet=_LEGAL, min_size=128, max_size=300),
    st.sampled_from(sorted(NOT_ALLOWED_SEND_TOPICS)),
    st.sampled_from(["", " ", "\t"]),
    st.one_of(st.integers(), st.none(), st.binary(min_size=1, max_size=8)),
)
_blank = st.sampled_from(["", " ", "\t\n"])
_with_separator = st.builds(lambda a, sep, b: a + sep + b, st.text(alphabet="abc", min_size=1, max_size=4),
                            st.sampled_from(["\x01", "\x02"]), st.text(alphabet="abc", max_size=4))
_bad_properties = st.one_of(
    st.builds(lambda name, value: {name: value}, st.sampled_from(sorted(RESERVED_PROPERTY_NAMES)),
              st.text(alphabet="xyz", min_size=1, max_size=5)),
    st.builds(lambda name, value: {name: value}, _blank, st.text(alphabet="xyz", min_size=1, max_size=5)),
    st.builds(lambda name, value: {name: value}, st.text(alphabet="xyz", min_size=1, max_size=5), _blank),
    st.builds(lambda name, value: {name: value}, st.text(alphabet="xyz", min_size=1, max_size=5),
              st.one_of(st.integers(), st.none(), st.binary(min_size=1, max_size=4))),
    st.builds(lambda name, value: {name: value}, _with_separator, st.just("v")),
    st.builds(lambda name, value: {name: value}, st.just("k"), _with_separator),
    st.builds(lambda n: {f"p{i}": "v" * 1000 for i in range(n)}, st.integers(33, 40)),  # over 32,767 bytes
)
_not_int32 = st.one_of(st.integers(max_value=-(2**31) - 1), st.integers(min_value=2**31), st.text(max_size=5),
                       st.floats(), st.booleans(), st.none())

_mistakes = st.one_of(
    st.builds(lambda body: Message(TOPIC, body), _not_bytes),
    st.builds(lambda topic: Message(topic, b"x"), _bad_topics),
    st.builds(lambda props: Message(TOPIC, b"x", properties=props), _bad_properties),
    st.builds(lambda level: Message(TOPIC, b"x", delay_time_level=level),
              st.one_of(st.integers(max_value=-1), _not_int32)),
    st.builds(lambda flag: Message(TOPIC, b"x", flag=flag), _not_int32),
    st.builds(lambda tags: Message(TOPIC, b"x", tags=tags), st.one_of(st.integers(), _with_separator)),
    st.builds(lambda keys: Message(TOPIC, b"x", keys=keys), st.one_of(st.integers(), st.lists(_with_separator,
                                                                                               min_size=1))),
)


@settings(max_examples=60)
@given(msg=_mistakes)
def test_every_mistake_is_refused_at_the_call_and_the_connection_lives_on(
        producer: BlockingProducer, cluster: tuple[Daemon, Daemon], msg: Message) -> None:
    broker = cluster[1]
    conn = _connection(producer, broker)
    _refused_everywhere(producer, msg)
    _next_send_on(producer, broker, conn)


def test_a_str_body_is_message_illegal(producer: BlockingProducer, cluster: tuple[Daemon, Daemon]) -> None:
    conn = _connection(producer, cluster[1])
    error = _refused_everywhere(producer, Message(TOPIC, "text"))  # type: ignore[arg-type]
    assert error.code == ResponseCode.MESSAGE_ILLEGAL and "not str" in str(error) and "encode" in str(error)
    _next_send_on(producer, cluster[1], conn)


def test_java_remarks_for_topic_body_and_properties(producer: BlockingProducer,
                                                    cluster: tuple[Daemon, Daemon]) -> None:
    conn = _connection(producer, cluster[1])
    cases: list[tuple[Message, str, int | None]] = [
        (Message("a b", b"x"), "contains illegal characters", None),
        (Message("T" * 128, b"x"), "longer than topic max length 127", None),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden", None),
        (Message(TOPIC, b""), "the message body length is zero", ResponseCode.MESSAGE_ILLEGAL),
        (Message(TOPIC, b"x" * (4 * 1024 * 1024 + 1)), "the message body size over max value, MAX: 4194304",
         ResponseCode.MESSAGE_ILLEGAL),
        (Message(TOPIC, b"x", properties={"UNIQ_KEY": "mine"}), "The Property<UNIQ_KEY> is used by system",
         ResponseCode.MESSAGE_ILLEGAL),
        (Message(TOPIC, b"x", properties={"k": " "}), "can not be null or blank", ResponseCode.MESSAGE_ILLEGAL),
    ]
    for msg, remark, code in cases:
        error = _refused_everywhere(producer, msg)
        assert remark in str(error) and error.code == code, (msg.topic[:20], str(error))
    _next_send_on(producer, cluster[1], conn)


def test_a_bytes_like_body_is_sent_as_its_bytes(producer: BlockingProducer, cluster: tuple[Daemon, Daemon]) -> None:
    ints = memoryview(bytearray(b"\x01\x00\x00\x00\x02\x00\x00\x00")).cast("i")  # 2 items, 8 bytes
    for body in (bytearray(b"from a bytearray"), memoryview(b"from a memoryview"), ints):
        assert producer.send(Message(TOPIC, body)).send_status is SendStatus.SEND_OK  # type: ignore[arg-type]


@settings(max_examples=30)
@given(body=_not_bytes)
def test_a_command_that_cannot_be_encoded_fails_alone(cluster: tuple[Daemon, Daemon], body: Any) -> None:
    """Below the SDK: the remoting client raises at the call and queues nothing, so the requests
    around it on the same connection are answered."""
    broker = cluster[1]

    async def run() -> None:
        client = RemotingClient()
        try:
            probe = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert (await client.invoke(broker.addr, probe, 5)).code == ResponseCode.SUCCESS
            conn = client._connections[broker.addr]
            before = conn.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
            with pytest.raises(TypeError, match="bytes-like"):
                client.invoke(broker.addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, body), 5)
            assert conn.pending_count == 1, "the refused request left no entry to time out"
            after = client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
            assert (await before).code == ResponseCode.SUCCESS and (await after).code == ResponseCode.SUCCESS
            assert client._connections[broker.addr] is conn
        finally:
            await client.close()

    run_sync(run(), 30)


async def test_seek_outside_the_queue_is_refused_as_in_java(cluster: tuple[Daemon, Daemon]) -> None:
    ns = cluster[0].addr
    async with Producer("pg_seek_check", ns, instance_name="seek-check") as p:
        first = await p.send(Message("SeekCheck", b"m0"))
        mq = first.message_queue
        for i in range(1, 5):
            await p.send(Message("SeekCheck", f"m{i}".encode()), queue=mq)
    async with LitePullConsumer("cg_seek_check", ns, instance_name="seek-check-c", auto_commit=False) as consumer:
        consumer.assign([mq])
        for offset in (10**12, 6, -1):
            with pytest.raises(MQClientError, match=f"Seek offset illegal, seek offset = {offset}, "
                                                    "min offset = 0, max offset = 5"):
                await consumer.seek(mq, offset)
        with pytest.raises(MQClientError, match="Seek offset illegal"):
            await consumer.seek(mq, "3")  # type: ignore[arg-type]
        await consumer.seek(mq, 3)
        got: list[bytes] = []
        for _ in range(20):
            got += [m.body for m in await consumer.poll(0.5)]
            if len(got) >= 2:
                break
        assert got[:2] == [b"m3", b"m4"]


_bad_groups = st.one_of(
    st.text(min_size=1, max_size=30).filter(_illegal_name),
    st.text(alphabet=_LEGAL, min_size=256, max_size=400),
    st.sampled_from(["", " "]),
)


@settings(max_examples=30)
@given(group=_bad_groups)
def test_a_bad_group_is_refused_at_start(cluster: tuple[Daemon, Daemon], group: str) -> None:
    """Validators.checkGroup, as Java's producers and consumers run it when they start."""

    async def run() -> None:
        for client in (Producer(group, cluster[0].addr), LitePullConsumer(group, cluster[0].addr)):
            with pytest.raises(MessageValidationError, match="group"):
                await client.start()
            assert client._instance is None, "nothing was started"

    run_sync(run(), 30)
