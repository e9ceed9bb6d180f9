"""Topic pages: the list with the create form, and one topic's route, queue status, consuming
groups and test-message form."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rocketmq_py.client.errors import NoRouteError
from rocketmq_py.client.message import Message
from rocketmq_py.client.validators import check_topic
from rocketmq_py.remoting.protocol.topic import PermName
from rocketmq_py.remoting.protocol.topic_validator import is_system_topic
from rocketmq_py.tools.dashboard.templating import render


def _user_topic(topic: str) -> bool:
    return not topic.startswith("%") and not is_system_topic(topic) and topic != "TBW102"


async def topic_list(request: Request) -> Response:
    admin = request.app.state.admin
    show_all = request.query_params.get("all") == "1"
    topics = sorted(t for t in await admin.fetch_all_topic_list() if show_all or _user_topic(t))
    clusters = sorted((await admin.examine_broker_cluster_info()).clusterAddrTable)
    return render(request, "topics.html", topics=topics, clusters=clusters, show_all=show_all)


def _int_field(form: dict[str, str], name: str, default: int) -> int:
    text = (form.get(name) or "").strip()
    if not text:
        return default
    if not text.isdigit() or not 1 <= int(text) <= 1024:
        raise ValueError(f"{name} must be a whole number from 1 to 1024, not {text!r}")
    return int(text)


async def create_topic(request: Request) -> Response:
    form = {k: str(v) for k, v in (await request.form()).items()}
    topic = form.get("topic", "").strip()
    check_topic(topic)
    await request.app.state.admin.create_topic(
        topic, cluster=form.get("cluster") or None, read_queue_nums=_int_field(form, "readQueueNums", 8),
        write_queue_nums=_int_field(form, "writeQueueNums", 8))
    return RedirectResponse(request.url_for("topic", topic=topic).include_query_params(created="1"), 303)


async def _topic_page(request: Request, topic: str, **extra: Any) -> Response:
    admin = request.app.state.admin
    try:
        route = await admin.examine_topic_route_info(topic)
    except NoRouteError as exc:
        # Just created: the broker registers it with the NameServer a moment later.
        return render(request, "topic.html", topic=topic, route=[], queues=[], groups=[], total=0,
                      no_route=str(exc), created=request.query_params.get("created") == "1", **extra)
    stats = await admin.examine_topic_stats(topic)
    queues = sorted(stats.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    groups = await admin.query_topic_consume_by_who(topic)
    addrs = {bd.brokerName: bd.brokerAddrs for bd in route.brokerDatas}
    route_rows = [{"broker": q.brokerName, "addrs": addrs.get(q.brokerName, {}), "read": q.readQueueNums,
                   "write": q.writeQueueNums, "perm": PermName.to_string(q.perm)}
                  for q in sorted(route.queueDatas, key=lambda q: q.brokerName)]
    return render(request, "topic.html", topic=topic, route=route_rows, queues=queues, groups=groups,
                  total=sum(o.max_offset - o.min_offset for _, o in queues),
                  created=request.query_params.get("created") == "1", **extra)


async def topic(request: Request) -> Response:
    return await _topic_page(request, request.path_params["topic"])


async def send_test_message(request: Request) -> Response:
    topic_name = request.path_params["topic"]
    form = {k: str(v) for k, v in (await request.form()).items()}
    msg = Message(topic_name, form.get("body", "").encode(), tags=form.get("tags") or None,
                  keys=form.get("keys") or None)
    producer = await request.app.state.producers.get(form.get("trace") == "on")
    result = await producer.send(msg)
    return await _topic_page(request, topic_name, sent=result)


routes = [
    Route("/topics", topic_list, name="topics"),
    Route("/topics", create_topic, methods=["POST"], name="create_topic"),
    Route("/topics/{topic}", topic, name="topic"),
    Route("/topics/{topic}/send", send_test_message, methods=["POST"], name="send_test_message"),
]
