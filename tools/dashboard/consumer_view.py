"""Consumer group pages: the groups the brokers know, and one group's lag per queue, its online
clients, and the reset of its offsets to a time."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.protocol.topic import RETRY_GROUP_TOPIC_PREFIX
from rocketmq_py.tools.dashboard.form_time import parse_form_time
from rocketmq_py.tools.dashboard.templating import render
from rocketmq_py.tools.mqadmin.consumer_commands import SYSTEM_GROUP_PREFIXES


async def group_list(request: Request) -> Response:
    admin: Admin = request.app.state.admin
    show_all = request.query_params.get("all") == "1"
    groups: set[str] = set()
    for addr in await admin.broker_addrs():
        groups.update(await admin.get_all_subscription_groups(addr))
    shown = sorted(g for g in groups if show_all or not g.startswith(SYSTEM_GROUP_PREFIXES))
    return render(request, "consumers.html", groups=shown, show_all=show_all)


async def _group_page(request: Request, group: str, **extra: Any) -> Response:
    admin: Admin = request.app.state.admin
    stats = await admin.examine_consume_stats(group)
    connection: dict[str, Any] | None = None
    offline: str | None = None
    try:
        connection = await admin.examine_consumer_connection_info(group)
    except MQClientError as exc:
        offline = str(exc)
    else:
        # A topic the online group subscribes to but has committed nothing of yet: the broker
        # counts it from offset 0 when asked for it by name, so its whole backlog shows as lag.
        for topic in (connection.get("subscriptionTable") or {}):
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and all(mq.topic != topic for mq in stats):
                stats.update(await admin.examine_consume_stats(group, topic))
    rows = sorted(stats.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id))
    topics = sorted({mq.topic for mq in stats if not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)})
    return render(request, "consumer.html", group=group, rows=rows, total_lag=sum(w.lag for _, w in rows),
                  connection=connection, offline=offline, topics=topics, **extra)


async def group(request: Request) -> Response:
    return await _group_page(request, request.path_params["group"])


async def reset_offset(request: Request) -> Response:
    group_name = request.path_params["group"]
    form = {k: str(v) for k, v in (await request.form()).items()}
    topic = form.get("topic", "").strip()
    if not topic:
        raise ValueError("choose the topic whose offsets to reset")
    millis = parse_form_time(form.get("time", ""), "time")
    admin: Admin = request.app.state.admin
    result = await admin.reset_offset_by_timestamp(topic, group_name, millis)
    if not result:
        result = await reset_offline_group(admin, topic, group_name, millis)
    reset = sorted(result.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    return await _group_page(request, group_name, reset=reset, reset_topic=topic, reset_time=millis)


async def reset_offline_group(admin: Admin, topic: str, group: str, millis: int) -> dict[MessageQueue, int]:
    """No client online to tell (CONSUMER_NOT_ONLINE): each queue's offset at ``millis`` set at its
    broker directly, as Java's ResetOffsetByTimeOldCommand does and RocketMQ Dashboard falls back
    to, so a group that is down restarts from there."""
    result = {}
    for mq in sorted(await admin.examine_topic_stats(topic)):
        offset = await admin.search_offset(mq, millis)
        await admin.update_consumer_offset(group, mq, offset)
        result[mq] = offset
    return result


routes = [
    Route("/consumers", group_list, name="consumers"),
    Route("/consumers/{group}", group, name="consumer"),
    Route("/consumers/{group}/reset", reset_offset, methods=["POST"], name="reset_offset"),
]
