"""Transactions without sockets: half/commit/op record shapes, END_TRANSACTION's checks, the check
round's bookkeeping, and one check round over a real store (the producer channel is a recorder)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketmq_py.broker.processors.end_transaction import check_prepare_message
from rocketmq_py.broker.topic_config_manager import TopicConfigManager
from rocketmq_py.broker.transaction.bridge import (
    CID_RMQ_SYS_TRANS,
    TransactionalMessageBridge,
    check_record,
    end_message_transaction,
    op_message_inner,
    parse_half_message_inner,
    reset_transaction_value,
)
from rocketmq_py.broker.transaction.check_service import (
    TransactionalMessageCheckService,
    check_times,
    immunity_ms,
    next_op_offset,
    read_op_progress,
)
from rocketmq_py.client import ClientStateError, LocalTransactionState, Message, TransactionProducer
from rocketmq_py.client.transaction_producer import _call
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    MessageConst,
    MessageExt,
    decode_record,
    string_to_properties,
)
from rocketmq_py.remoting.protocol.transaction import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketmq_py.store.message_store import DefaultMessageStore
from tests.store_helpers import STORE_HOST, message
from tests.waiting import wait_until

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def test_reset_transaction_value_replaces_only_the_two_bits() -> None:
    assert reset_transaction_value(0x4 | 0x1 | 0x2, 0) == 0x3
    assert reset_transaction_value(0x4 | 0x1, TRANSACTION_COMMIT_TYPE) == 0x9
    assert reset_transaction_value(0xC, 0x8) == 0x8


def test_half_message_keeps_the_real_destination() -> None:
    inner = message("Orders", b"x", queue_id=3, uniq="U1", sys_flag=TRANSACTION_PREPARED_TYPE | 0x1)
    props = {MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: "pg"}
    parse_half_message_inner(inner, props)
    assert (inner.topic, inner.queue_id, inner.sys_flag) == (HALF, 0, 0x1)
    stored = string_to_properties(inner.properties_string)
    assert stored[MessageConst.REAL_TOPIC] == "Orders" and stored[MessageConst.REAL_QUEUE_ID] == "3"
    assert stored[MessageConst.TRANSACTION_PREPARED] == "true"


def _half(**props: str) -> MessageExt:
    base = {MessageConst.REAL_TOPIC: "Orders", MessageConst.REAL_QUEUE_ID: "2", MessageConst.PRODUCER_GROUP: "pg",
            MessageConst.TRANSACTION_PREPARED: "true", MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1",
            MessageConst.TAGS: "T", MessageConst.KEYS: "a b"}
    base.update(props)
    return MessageExt(topic=HALF, body=b"payload", queue_id=0, queue_offset=7, commit_log_offset=4096, flag=5,
                      born_timestamp=1700000000000, born_host=("10.0.0.1", 5), store_host=STORE_HOST,
                      properties=base)


def test_commit_rebuilds_the_real_message() -> None:
    inner = end_message_transaction(_half(), TRANSACTION_COMMIT_TYPE, ("10.9.9.9", 10911))
    assert (inner.topic, inner.queue_id) == ("Orders", 2)
    assert inner.sys_flag == TRANSACTION_COMMIT_TYPE
    assert inner.prepared_transaction_offset == 4096
    assert (inner.body, inner.flag) == (b"payload", 5)
    # Java builds the string before dropping REAL_*, so the record keeps TRAN_MSG and REAL_TOPIC.
    stored = string_to_properties(inner.properties_string)
    assert (stored[MessageConst.KEYS], stored[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]) == ("a b", "U1")
    assert stored[MessageConst.TRANSACTION_PREPARED] == "true" and stored[MessageConst.REAL_TOPIC] == "Orders"
    assert inner.store_host == ("10.9.9.9", 10911) and inner.born_host == ("10.0.0.1", 5)


def test_op_record_and_check_body() -> None:
    op = op_message_inner(42, 0, STORE_HOST)
    assert (op.topic, op.queue_id, op.body) == (OP, 0, b"42")
    assert string_to_properties(op.properties_string)[MessageConst.TAGS] == "d"
    seen = check_record(_half())
    assert (seen.topic, seen.queue_id, seen.body) == ("Orders", 2, b"payload")


def _end(**kw: object) -> EndTransactionRequestHeader:
    base: dict[str, object] = {"producerGroup": "pg", "tranStateTableOffset": 7, "commitLogOffset": 4096,
                               "commitOrRollback": 8, "msgId": "U1"}
    base.update(kw)
    return EndTransactionRequestHeader(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("half", "header", "problem"), [
    (_half(), _end(), None),
    (None, _end(), "Find prepared transaction message failed"),
    (MessageExt(topic="Orders", body=b"", queue_offset=7, commit_log_offset=4096,
                properties={MessageConst.PRODUCER_GROUP: "pg"}), _end(), "Find prepared transaction message failed"),
    (_half(), _end(producerGroup="other"), "The producer group wrong"),
    (_half(), _end(tranStateTableOffset=8), "The transaction state table offset wrong"),
    (_half(), _end(commitLogOffset=1), "The commit log offset wrong"),
])
def test_end_transaction_checks(half: MessageExt | None, header: EndTransactionRequestHeader,
                                problem: str | None) -> None:
    assert check_prepare_message(half, header) == problem


def test_headers_round_trip_with_java_names() -> None:
    end = _end(fromTransactionCheck=True, transactionId="U1")
    ext = end.to_ext_fields()
    assert ext["commitOrRollback"] == "8" and ext["fromTransactionCheck"] == "true"
    assert EndTransactionRequestHeader.from_ext_fields(ext) == end
    check = CheckTransactionStateRequestHeader(tranStateTableOffset=3, commitLogOffset=99, msgId="U", transactionId="U",
                                               offsetMsgId="0A")
    assert CheckTransactionStateRequestHeader.from_ext_fields(check.to_ext_fields()) == check


def test_op_progress_and_op_offset() -> None:
    # ops: (op offset, half offset settled); the check offset is 5
    progress = read_op_progress([(0, 3), (1, 5), (2, 4), (3, 9)], 5)
    assert progress.removed == {5: 1, 9: 3}
    assert progress.done_ops == {0, 2}
    assert next_op_offset(0, progress.done_ops) == 1, "op 1 still settles a half message ahead"
    assert next_op_offset(0, {0, 1, 2}) == 3
    assert next_op_offset(4, {0, 1}) == 4


def test_immunity_time() -> None:
    assert immunity_ms(_half(), 6000) == 6000
    assert immunity_ms(_half(CHECK_IMMUNITY_TIME_IN_SECONDS="30"), 6000) == 30000
    assert immunity_ms(_half(CHECK_IMMUNITY_TIME_IN_SECONDS="soon"), 6000) == 6000


@given(st.one_of(st.integers(-(2**70), 2**70).map(str), st.text(alphabet="+- 0123456789_", max_size=24)))
def test_transaction_properties_read_as_javas_parsers_read_them(raw: str) -> None:
    """CHECK_IMMUNITY_TIME_IN_SECONDS through Long.parseLong (-1 or unreadable: the timeout),
    TRANSACTION_CHECK_TIMES through Integer.parseInt (unreadable: 0)."""
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    readable = digits.isdigit()
    seconds = int(raw) if readable and -(2**63) <= int(raw) < 2**63 else -1
    assert immunity_ms(_half(CHECK_IMMUNITY_TIME_IN_SECONDS=raw), 6000) == (6000 if seconds == -1 else seconds * 1000)
    times = int(raw) if readable and -(2**31) <= int(raw) < 2**31 else 0
    assert check_times(_half(TRANSACTION_CHECK_TIMES=raw)) == times


class RecordingChannel:
    """Stands for a producer's connection: records what the check service sends it."""

    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []
        self.remote_addr = "127.0.0.1:1"
        self.is_open = True

    def invoke_oneway(self, request: RemotingCommand) -> None:
        self.sent.append(request)


class OneProducer:
    def __init__(self, channel: RecordingChannel | None) -> None:
        self.channel = channel

    def get_available_channel(self, group: str) -> RecordingChannel | None:
        return self.channel if group == "pg" else None


async def _put_half(bridge: TransactionalMessageBridge, uniq: str, born_ms: int) -> None:
    inner = message("Orders", uniq.encode(), queue_id=1, uniq=uniq,
                    extra={MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: "pg"})
    inner.born_timestamp = born_ms
    props = string_to_properties(inner.properties_string)
    bridge.prepare_half_message(inner, props)
    assert (await bridge.store.put_message(inner)).ok


def _now_ms() -> int:
    return int(time.time() * 1000)


def _service(store: DefaultMessageStore, root: str, channel: RecordingChannel | None, **config: int
             ) -> tuple[TransactionalMessageCheckService, ConsumerOffsetManager]:
    bridge = TransactionalMessageBridge(store, TopicConfigManager(root), lambda: STORE_HOST)
    offsets = ConsumerOffsetManager(root)
    service = TransactionalMessageCheckService(bridge, BrokerConfig(brokerName="b", **config), offsets,
                                               OneProducer(channel), "b")  # type: ignore[arg-type]
    return service, offsets


async def _next_round(service: TransactionalMessageCheckService) -> None:
    # A round leaves copies stored during itself to the next round (by store time in ms).
    t0 = _now_ms()
    assert await wait_until(lambda: _now_ms() > t0, 1.0)
    await service.check()


async def test_check_round_skips_settled_rechecks_pending_and_discards_at_the_limit(
        store: DefaultMessageStore, tmp_path: str) -> None:
    channel = RecordingChannel()
    service, offsets = _service(store, str(tmp_path), channel, transactionTimeOut=60_000, transactionCheckMax=2)
    bridge = service.bridge
    await _put_half(bridge, "settled", _now_ms() - 120_000)  # half offset 0
    await _put_half(bridge, "pending", _now_ms() - 120_000)  # half offset 1
    settled = bridge.half_message_at(0)
    assert settled is not None
    assert (await bridge.put_op_message(settled)).ok

    await _next_round(service)
    assert [r.code for r in channel.sent] == [RequestCode.CHECK_TRANSACTION_STATE]
    request = channel.sent[0]
    header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields or {})
    body = decode_record(request.body or b"")
    assert (body.topic, body.queue_id, body.body) == ("Orders", 1, b"pending")
    assert body.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
    assert header.tranStateTableOffset == 2, "the check names the re-put copy"
    copy = bridge.look_message(header.commitLogOffset)
    assert copy is not None and copy.topic == HALF and copy.queue_offset == 2
    assert header.msgId == header.transactionId == "pending"
    assert offsets.query_offset(CID_RMQ_SYS_TRANS, HALF, 0) == 2
    assert offsets.query_offset(CID_RMQ_SYS_TRANS, OP, 0) == 1

    await _next_round(service)  # second check of the unanswered copy
    await _next_round(service)  # transactionCheckMax reached: moved away, not checked
    await _next_round(service)  # and nothing is left to check
    times = [decode_record(r.body or b"").properties[MessageConst.TRANSACTION_CHECK_TIMES] for r in channel.sent]
    assert times == ["1", "2"]
    assert store.get_max_offset_in_queue("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1
    assert offsets.query_offset(CID_RMQ_SYS_TRANS, HALF, 0) == store.get_max_offset_in_queue(HALF, 0) == 4


async def test_a_message_not_yet_due_stops_the_round(store: DefaultMessageStore, tmp_path: str) -> None:
    channel = RecordingChannel()
    service, offsets = _service(store, str(tmp_path), channel, transactionTimeOut=60_000)
    await _put_half(service.bridge, "young", _now_ms())
    await _put_half(service.bridge, "old", _now_ms() - 120_000)
    await _next_round(service)
    assert channel.sent == [], "the half queue is in store order: nothing behind a young message is looked at"
    assert offsets.query_offset(CID_RMQ_SYS_TRANS, HALF, 0) == -1


async def test_no_live_producer_still_counts_the_check(store: DefaultMessageStore, tmp_path: str) -> None:
    service, _ = _service(store, str(tmp_path), None, transactionTimeOut=0)
    await _put_half(service.bridge, "orphan", _now_ms() - 5000)
    await _next_round(service)
    copy = service.bridge.half_message_at(1)
    assert copy is not None and copy.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
    assert service.checks_sent == 0


def test_transaction_producer_marks_half_messages_prepared() -> None:
    producer = TransactionProducer("pg")
    plain = Message("T", b"x")
    half = Message("T", b"x", properties={MessageConst.TRANSACTION_PREPARED: "true"})
    assert producer._body(plain)[1] & TRANSACTION_PREPARED_TYPE == 0
    assert producer._body(half)[1] & TRANSACTION_PREPARED_TYPE == TRANSACTION_PREPARED_TYPE
    assert producer.create_topic_key in producer.topics(), "routes to the brokers before any send, for checks"


async def test_listener_answers_sync_async_and_none() -> None:
    async def later() -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    assert await _call(lambda: LocalTransactionState.ROLLBACK_MESSAGE) is LocalTransactionState.ROLLBACK_MESSAGE
    assert await _call(later) is LocalTransactionState.COMMIT_MESSAGE
    assert await _call(lambda: None) is LocalTransactionState.UNKNOW
    with pytest.raises(TypeError, match="not a LocalTransactionState"):
        await _call(lambda: "COMMIT")


async def test_send_in_transaction_needs_a_listener() -> None:
    with pytest.raises(ClientStateError, match="TransactionListener is null"):
        await TransactionProducer("pg").send_message_in_transaction(Message("T", b"x"))
