"""The trace codec against records built from 4.9's format definition (as Java's
TraceDataEncoder writes them), both ways, and against arbitrary text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.client.trace import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    decode,
    decode_from_trace_trans_data,
    encode,
)
from rocketmq_py.remoting.protocol.message import MessageExt

C, F = "\x01", "\x02"


def java_record(*fields: str, end: str = F) -> str:
    return C.join(fields) + end


# As a Java 4.9.7 producer, consumer and transaction producer write them (Java's null as "null").
JAVA_PUB = java_record("Pub", "1700000000123", "DefaultRegion", "PG", "TopicA", "7F000001ABCD", "TagA", "k1 k2",
                       "127.0.0.1:10911", "5", "3", "0", "7F00000100002A9F0000000000000042", "true")
JAVA_SUB_BEFORE = java_record("SubBefore", "1700000000200", "DefaultRegion", "CG", "REQ1", "7F000001ABCD", "0",
                              "k1 k2")
JAVA_SUB_AFTER = java_record("SubAfter", "REQ1", "7F000001ABCD", "12", "false", "k1 k2", "4", end=C) + \
    "1700000000300" + C + "CG" + F
JAVA_END_TX = java_record("EndTransaction", "1700000000400", "DefaultRegion", "TPG", "TopicT", "7F000001ABCE",
                          "null", "null", "127.0.0.1:10911", "2", "7F000001ABCE", "COMMIT_MESSAGE", "false")


def test_java_records_decode() -> None:
    pub, before, after, end = decode(JAVA_PUB + JAVA_SUB_BEFORE + JAVA_SUB_AFTER + JAVA_END_TX)
    assert pub.trace_type is TraceType.Pub and pub.time_stamp == 1700000000123 and pub.group_name == "PG"
    b = pub.trace_beans[0]
    assert (b.topic, b.msg_id, b.tags, b.keys, b.store_host, b.body_length, b.msg_type, b.offset_msg_id) == (
        "TopicA", "7F000001ABCD", "TagA", "k1 k2", "127.0.0.1:10911", 5, MessageType.Normal_Msg,
        "7F00000100002A9F0000000000000042")
    assert pub.cost_time == 3 and pub.success is True
    assert before.trace_type is TraceType.SubBefore and before.request_id == "REQ1" and before.group_name == "CG"
    assert before.trace_beans[0].retry_times == 0 and before.time_stamp == 1700000000200
    assert after.trace_type is TraceType.SubAfter and after.request_id == "REQ1" and after.cost_time == 12
    assert after.success is False and after.context_code == ConsumeReturnType.FAILED
    assert after.time_stamp == 1700000000300 and after.group_name == "CG"
    assert end.trace_type is TraceType.EndTransaction and end.trace_beans[0].transaction_state == "COMMIT_MESSAGE"
    assert end.trace_beans[0].msg_type is MessageType.Trans_msg_Commit and end.trace_beans[0].tags == "null"


def test_older_and_cloud_layouts_decode() -> None:
    # A Pub of 13 fields (no offset id) and one of 15 (an old client's host); a cloud SubAfter
    # ends after the context code.
    (short,) = decode(java_record("Pub", "1", "R", "PG", "T", "ID", "t", "k", "h", "1", "2", "3", "false"))
    assert short.success is False and short.trace_beans[0].offset_msg_id == ""
    (old,) = decode(java_record("Pub", "1", "R", "PG", "T", "ID", "t", "k", "h", "1", "2", "3", "OFF", "true", "CH"))
    assert old.trace_beans[0].client_host == "CH" and old.trace_beans[0].offset_msg_id == "OFF"
    (cloud,) = decode(java_record("SubAfter", "REQ", "ID", "7", "true", "k", "0", end=C))
    assert cloud.group_name == "" and cloud.context_code == 0 and cloud.cost_time == 7


def test_encode_is_javas_text() -> None:
    pub = TraceContext(TraceType.Pub, [TraceBean(topic="TopicA", msg_id="7F000001ABCD", tags="TagA", keys="k1 k2",
                                                 store_host="127.0.0.1:10911", body_length=5,
                                                 offset_msg_id="7F00000100002A9F0000000000000042")],
                       time_stamp=1700000000123, region_id="DefaultRegion", group_name="PG", cost_time=3)
    out = encode(pub)
    assert out.trans_data == JAVA_PUB
    assert out.trans_keys == ["7F000001ABCD", "k1", "k2"]
    after = TraceContext(TraceType.SubAfter, [TraceBean(msg_id="7F000001ABCD", keys="k1 k2")], time_stamp=1700000000300,
                         group_name="CG", request_id="REQ1", cost_time=12, success=False, context_code=4)
    assert encode(after).trans_data == JAVA_SUB_AFTER
    end = TraceContext(TraceType.EndTransaction, [TraceBean(
        topic="TopicT", msg_id="7F000001ABCE", tags=None, keys=None, store_host="127.0.0.1:10911",
        msg_type=MessageType.Trans_msg_Commit, transaction_id="7F000001ABCE", transaction_state="COMMIT_MESSAGE")],
        time_stamp=1700000000400, region_id="DefaultRegion", group_name="TPG")
    assert encode(end).trans_data == JAVA_END_TX
    assert encode(end).trans_keys == ["7F000001ABCE"]  # a null key adds nothing


def test_sub_before_writes_one_record_per_message() -> None:
    ctx = TraceContext(TraceType.SubBefore, [TraceBean(msg_id="A", keys="x"), TraceBean(msg_id="B", keys=None)],
                       group_name="CG")
    decoded = decode(encode(ctx).trans_data)
    assert [c.trace_beans[0].msg_id for c in decoded] == ["A", "B"]
    assert decoded[1].trace_beans[0].keys == "null"
    assert encode(ctx).trans_keys == ["A", "x", "B"]


def test_trace_view_keeps_the_asked_message_only() -> None:
    msg = MessageExt(topic="RMQ_SYS_TRACE_TOPIC", body=(JAVA_PUB + JAVA_END_TX).encode(),
                     born_host=("10.1.2.3", 5555))
    (view,) = decode_from_trace_trans_data("7F000001ABCD", msg)
    assert (view.msg_type, view.group_name, view.client_host, view.status, view.cost_time) == (
        "Pub", "PG", "10.1.2.3", "success", 3)


text = st.lists(st.sampled_from(["\x01", "\x02", "Pub", "SubAfter", "SubBefore", "EndTransaction", "1", "x", "true",
                                 "-", "9" * 30, "", "\u00e9"]), max_size=60).map("".join)


@given(text)
def test_arbitrary_text_never_raises(data: str) -> None:
    for ctx in decode(data):
        assert ctx.trace_beans


@given(st.text(max_size=20).filter(lambda s: "\x01" not in s and "\x02" not in s and s),
       st.integers(0, 2**40), st.integers(0, 10**6), st.booleans())
def test_round_trip(name: str, ts: int, cost: int, ok: bool) -> None:
    ctx = TraceContext(TraceType.Pub, [TraceBean(topic=name, msg_id=name, tags=name, keys=name, store_host=name,
                                                 body_length=cost, offset_msg_id=name)],
                       time_stamp=ts, region_id=name, group_name=name, cost_time=cost, success=ok)
    (back,) = decode(encode(ctx).trans_data)
    assert back.trace_beans[0] == ctx.trace_beans[0] and back.success == ok and back.time_stamp == ts
