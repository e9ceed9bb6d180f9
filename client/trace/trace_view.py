"""TraceView: what queryMsgTraceById and the dashboard show of one record about one message."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from rocketmq_py.client.trace.trace_data_encoder import decode
from rocketmq_py.remoting.protocol.message import MessageExt

if TYPE_CHECKING:
    from rocketmq_py.client.admin import Admin

# Java's queryMessage(traceTopic, msgId, 64, 0, now).
MAX_TRACE_MESSAGES = 64


@dataclass
class TraceView:
    """One record about ``msg_id``; ``client_host`` is the host that wrote the trace message
    (its born host), ``msg_type`` the record kind (Pub, SubBefore, SubAfter, EndTransaction)."""

    msg_id: str
    tags: str | None
    keys: str | None
    store_host: str
    client_host: str
    cost_time: int
    msg_type: str
    offset_msg_id: str
    time_stamp: int
    topic: str
    group_name: str
    status: str

    def to_dict(self) -> dict[str, object]:
        """Java's TraceView property names, for --json and the console."""
        d = asdict(self)
        return {"msgId": d["msg_id"], "tags": d["tags"], "keys": d["keys"], "storeHost": d["store_host"],
                "clientHost": d["client_host"], "costTime": d["cost_time"], "msgType": d["msg_type"],
                "offSetMsgId": d["offset_msg_id"], "timeStamp": d["time_stamp"], "topic": d["topic"],
                "groupName": d["group_name"], "status": d["status"]}


def decode_from_trace_trans_data(key: str, message: MessageExt) -> list[TraceView]:
    """The records of one trace message that concern message ``key`` (Java's
    TraceView.decodeFromTraceTransData)."""
    body = message.body.decode("utf-8", errors="replace")
    born = message.born_host[0]  # getBornHostString: the address alone, no port
    views = []
    for ctx in decode(body):
        bean = ctx.trace_beans[0]
        if bean.msg_id != key:
            continue
        views.append(TraceView(
            msg_id=bean.msg_id, tags=bean.tags, keys=bean.keys, store_host=bean.store_host, client_host=born,
            cost_time=ctx.cost_time, msg_type=ctx.trace_type.value, offset_msg_id=bean.offset_msg_id,
            time_stamp=ctx.time_stamp, topic=bean.topic, group_name=ctx.group_name,
            status="success" if ctx.success else "failed"))
    return views


async def query_trace_by_msg_id(admin: Admin, trace_topic: str, msg_id: str) -> list[TraceView]:
    """Every record about ``msg_id`` in the trace messages indexed under it, oldest first (what
    QueryMsgTraceByIdSubCommand reads, for mqadmin and the dashboard)."""
    found = await admin.query_message(trace_topic, msg_id, MAX_TRACE_MESSAGES, 0, int(time.time() * 1000))
    views = [v for m in found for v in decode_from_trace_trans_data(msg_id, m)]
    return sorted(views, key=lambda v: v.time_stamp)
