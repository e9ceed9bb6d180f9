"""TraceDataEncoder: trace contexts to and from 4.9's text format (docs/message_trace.md).

A record is its fields joined by CONTENT_SPLITOR (\\x01) and ended by FIELD_SPLITOR (\\x02);
a trace message's body is records one after another. Java appends a missing (null) string
as the four letters ``null`` and splits with ``String.split``, which drops trailing empty
fields; both are kept here, so a record reads the same on either side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketmq_py.client.trace.trace_constants import CONTENT_SPLITOR, FIELD_SPLITOR
from rocketmq_py.client.trace.trace_context import MessageType, TraceBean, TraceContext, TraceType
from rocketmq_py.remoting.protocol.message import MessageConst


@dataclass
class TraceTransferBean:
    """One context's records and the keys its trace message must be indexed under: every
    message id, then each of the message's keys (so a trace is found by id or by key)."""

    trans_data: str
    trans_keys: list[str] = field(default_factory=list)


def _s(value: object) -> str:
    """Java's StringBuilder.append: null as ``null``, booleans in lower case."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _record(*fields: object, ended: bool = True) -> str:
    return CONTENT_SPLITOR.join(_s(f) for f in fields) + (FIELD_SPLITOR if ended else CONTENT_SPLITOR)


def encode(ctx: TraceContext) -> TraceTransferBean:
    """Java's encoderFromContextBean: Pub and EndTransaction write their one bean, SubBefore and
    SubAfter one record per bean."""
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.trace_beans[0]
        data = _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                       b.store_host, b.body_length, ctx.cost_time, int(b.msg_type), b.offset_msg_id, ctx.success)
    elif t is TraceType.SubBefore:
        data = "".join(_record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                               b.retry_times, b.keys) for b in ctx.trace_beans)
    elif t is TraceType.SubAfter:
        data = "".join(_record(t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                               ctx.context_code, ctx.time_stamp, ctx.group_name) for b in ctx.trace_beans)
    else:
        b = ctx.trace_beans[0]
        data = _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                       b.store_host, int(b.msg_type), b.transaction_id, b.transaction_state,
                       b.from_transaction_check)
    keys: list[str] = []
    for b in ctx.trace_beans:
        keys.append(_s(b.msg_id))
        if b.keys:
            keys.extend(b.keys.split(MessageConst.KEY_SEPARATOR))
    return TraceTransferBean(data, keys)


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)``: trailing empty strings removed."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _bool(text: str) -> bool:
    """Boolean.parseBoolean: true only for ``true`` in any case."""
    return text.lower() == "true"


def _decode_record(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == "Pub":
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         body_length=int(line[9]), msg_type=MessageType(int(line[11])))
        ctx = TraceContext(TraceType.Pub, [bean], time_stamp=int(line[1]), region_id=line[2], group_name=line[3],
                           cost_time=int(line[10]))
        if len(line) == 13:
            ctx.success = _bool(line[12])
        elif len(line) >= 14:  # 14: with the offset id; 15 and more: an older client's host too
            bean.offset_msg_id, ctx.success = line[12], _bool(line[13])
            if len(line) >= 15:
                bean.client_host = line[14]
        return ctx
    if kind == "SubBefore":
        bean = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7])
        return TraceContext(TraceType.SubBefore, [bean], time_stamp=int(line[1]), region_id=line[2],
                            group_name=line[3], request_id=line[4])
    if kind == "SubAfter":
        ctx = TraceContext(TraceType.SubAfter, [TraceBean(msg_id=line[2], keys=line[5])], time_stamp=0,
                           request_id=line[1], cost_time=int(line[3]), success=_bool(line[4]))
        if len(line) >= 7:
            ctx.context_code = int(line[6])
        if len(line) >= 9:  # a cloud-channel record stops after the context code
            ctx.time_stamp, ctx.group_name = int(line[7]), line[8]
        return ctx
    if kind == "EndTransaction":
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         msg_type=MessageType(int(line[9])), transaction_id=line[10], transaction_state=line[11],
                         from_transaction_check=_bool(line[12]))
        return TraceContext(TraceType.EndTransaction, [bean], time_stamp=int(line[1]), region_id=line[2],
                            group_name=line[3])
    return None  # a kind this version does not know: skipped, as Java skips it


def decode(trace_data: str) -> list[TraceContext]:
    """Java's decoderFromTraceDataString, except that a malformed record (too few fields, a
    number that is not one) is skipped rather than failing the whole message: a trace topic is
    written by many clients, and one bad record must not hide the others."""
    out: list[TraceContext] = []
    for record in _java_split(trace_data, FIELD_SPLITOR):
        try:
            ctx = _decode_record(_java_split(record, CONTENT_SPLITOR) or [""])
        except (IndexError, ValueError):
            continue
        if ctx is not None:
            out.append(ctx)
    return out
