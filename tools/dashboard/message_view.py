"""Message pages: search by topic and key, by id, or by time range; one message with its body
and properties; a message's trace."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.trace import RMQ_SYS_TRACE_TOPIC, query_trace_by_msg_id
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.message import MessageExt
from rocketmq_py.tools.dashboard.form_time import parse_form_time
from rocketmq_py.tools.dashboard.templating import render
from rocketmq_py.tools.mqadmin.message_commands import _read_range

# Search results shown at most (RocketMQ Dashboard's query by key shows 64 too).
MAX_RESULTS = 64


async def find_message(admin: Admin, topic: str | None, msg_id: str) -> MessageExt | None:
    """A message by the id users see (UNIQ_KEY, with its topic) or by its offset id."""
    if topic:
        found = await admin.query_message_by_unique_key(topic, msg_id)
        if found is not None:
            return found
    try:
        return await admin.view_message(msg_id)
    except (MQClientError, RemotingError, ValueError, OSError):
        return None


async def search(request: Request) -> Response:
    admin: Admin = request.app.state.admin
    q = {k: v.strip() for k, v in request.query_params.items()}
    mode, topic = q.get("mode", ""), q.get("topic", "")
    results: list[MessageExt] | None = None
    if mode == "key":
        if not topic or not q.get("key"):
            raise ValueError("a search by key needs the topic and the key")
        results = await admin.query_message(topic, q["key"], MAX_RESULTS)
    elif mode == "id":
        if not q.get("msgId"):
            raise ValueError("a search by id needs the message id")
        found = await find_message(admin, topic or None, q["msgId"])
        results = [found] if found is not None else []
    elif mode == "time":
        if not topic:
            raise ValueError("a search by time needs the topic")
        begin = parse_form_time(q.get("begin") or "0", "begin")
        end = parse_form_time(q.get("end") or "now", "end")
        found_range = await _read_range(admin, topic, None, None, begin, end, None, MAX_RESULTS)
        results = sorted((m for read, _ in found_range.values() for m in read), key=lambda m: m.store_timestamp)
    return render(request, "messages.html", q=q, mode=mode, results=results)


async def message(request: Request) -> Response:
    topic, msg_id = request.path_params["topic"], request.path_params["msg_id"]
    found = await find_message(request.app.state.admin, topic, msg_id)
    if found is None:
        raise MQClientError(f"no message {msg_id} in topic {topic}")
    return render(request, "message.html", msg=found, body=found.body.decode("utf-8", errors="replace"))


async def trace(request: Request) -> Response:
    msg_id = request.path_params["msg_id"]
    trace_topic = request.query_params.get("traceTopic", "").strip() or RMQ_SYS_TRACE_TOPIC
    views = await query_trace_by_msg_id(request.app.state.admin, trace_topic, msg_id)
    return render(request, "trace.html", msg_id=msg_id, trace_topic=trace_topic, views=views)


routes = [
    Route("/messages", search, name="messages"),
    Route("/messages/{topic}/{msg_id}", message, name="message"),
    Route("/trace/{msg_id}", trace, name="trace"),
]
