"""Queue-level commands: queryCq, printMsgByQueue, checkMsgSendRT."""

from __future__ import annotations

import json
import time

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.message import Message
from rocketmq_py.client.producer import Producer
from rocketmq_py.remoting.protocol.route import MASTER_ID
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import (
    CommandError,
    JsonOption,
    NamesrvOption,
    command,
    emit,
    parse_timestamp,
    run_admin,
)
from rocketmq_py.tools.mqadmin.message_commands import _read_range, message_dict
from rocketmq_py.tools.mqadmin.topic_commands import parse_bool


@command(app, "queryCq", "Query cq command.")
def query_cq(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    queue_id: int = typer.Option(..., "-q", "--queue", help="queue num, ie. 1"),
    index: int = typer.Option(..., "-i", "--index", help="start queue index."),
    count: int = typer.Option(10, "-c", "--count", help="how many."),
    broker_addr: str | None = typer.Option(None, "-b", "--broker", help="broker addr."),
    group: str | None = typer.Option(None, "-g", "--consumer", help="consumer group."),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> dict:  # type: ignore[type-arg]
        addr = broker_addr
        if not addr:
            # Java asks the route's first broker's master.
            route = await admin.examine_topic_route_info(topic)
            addr = next((bd.brokerAddrs[MASTER_ID] for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs), None)
            if addr is None:
                raise CommandError(f"no master broker serves topic {topic}")
        return await admin.query_consume_queue(addr, topic, queue_id, index, count, group)

    body = run_admin(namesrv, job)
    if as_json:
        emit(True, body)
        return
    if body.get("subscriptionData") is not None:
        typer.echo(f"Subscription data: \n{json.dumps(body['subscriptionData'], indent=1)}")
    if body.get("filterData") is not None:
        typer.echo(f"Filter data: \n{body['filterData']}")
    typer.echo(f"Queue data: \nmax: {body.get('maxQueueIndex', 0)}, min: {body.get('minQueueIndex', 0)}")
    for i, unit in enumerate(body.get("queueData") or [], index):
        typer.echo(f"idx: {i}\nConsumeQueueData{{physicOffset={unit.get('physicOffset')}, "
                   f"physicSize={unit.get('physicSize')}, tagsCode={unit.get('tagsCode')}, "
                   f"extendDataJson='{unit.get('extendDataJson')}', bitMap='{unit.get('bitMap')}', "
                   f"eval={str(unit.get('eval', False)).lower()}, msg='{unit.get('msg')}'}}\n"
                   "======================================")


@command(app, "printMsgByQueue", "Print Message Detail")
def print_msg_by_queue(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    broker_name: str = typer.Option(..., "-a", "--brokerName", help="broker name"),
    queue_id: int = typer.Option(..., "-i", "--queueId", help="queue id"),
    charset: str = typer.Option("utf-8", "-c", "--charsetName", help="CharsetName(eg: UTF-8,GBK)"),
    sub_expression: str = typer.Option("*", "-s", "--subExpression", help="Subscribe Expression(eg: TagA || TagB)"),
    begin: str | None = typer.Option(None, "-b", "--beginTimestamp",
                                     help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    end: str | None = typer.Option(None, "-e", "--endTimestamp",
                                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    print_msg: str = typer.Option("false", "-p", "--printMsg", help="print msg. eg: true | false(default)"),
    print_body: str = typer.Option("false", "-d", "--printBody", help="print body. eg: true | false(default)"),
    calculate: str = typer.Option("false", "-f", "--calculate", help="calculate by tag. eg: true | false(default)"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    show, with_body, by_tag = parse_bool(print_msg, "-p"), parse_bool(print_body, "-d"), parse_bool(calculate, "-f")
    try:
        "".encode(charset)
    except LookupError:
        raise CommandError(f"unknown charset {charset!r} (-c)") from None
    begin_ms = parse_timestamp(begin) if begin else None
    end_ms = parse_timestamp(end) if end else None
    tags = None if sub_expression.strip() == "*" else {t.strip() for t in sub_expression.split("||")}
    found = run_admin(namesrv, lambda a: _read_range(a, topic, broker_name, queue_id, begin_ms, end_ms, None, None))
    msgs = [m for read, _ in found.values() for m in read if tags is None or m.tags in tags]
    counts: dict[str, int] = {}
    for m in msgs:
        counts[m.tags or ""] = counts.get(m.tags or "", 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    if as_json:
        emit(True, {"topic": topic, "brokerName": broker_name, "queueId": queue_id, "count": len(msgs),
                    **({"messages": [message_dict(m, charset, with_body) for m in msgs]} if show else {}),
                    **({"tagCounts": dict(ranked)} if by_tag else {})})
        return
    if show:
        for m in msgs:
            body = m.body.decode(charset, errors="replace") if with_body else "NOT PRINT BODY"
            typer.echo(f"MSGID: {m.msg_id} {json.dumps(message_dict(m, charset, False))} BODY: {body}")
    if by_tag:
        for tag, n in ranked:
            typer.echo(f"Tag: {tag:<30s} Count: {n}")


@command(app, "checkMsgSendRT", "check message send response time")
def check_msg_send_rt(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    amount: int = typer.Option(100, "-a", "--amount", help="message amount | default 100"),
    size: int = typer.Option(128, "-s", "--size", help="message size | default 128 Byte"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    if amount < 2:
        raise CommandError(f"-a must be at least 2 (the first send, which opens the connections, is left out "
                           f"of the average), not {amount}")
    if size < 0:
        raise CommandError(f"-s must not be negative, not {size}")

    async def job(admin: Admin) -> list[dict[str, object]]:
        rows: list[dict[str, object]] = []
        group = str(int(time.time() * 1000))  # Java's tool names its producer group by the time
        async with Producer(group, admin.config.namesrv_addr, retry_times_when_send_failed=0) as producer:
            queues = await producer.fetch_publish_message_queues(topic)
            if not queues:
                raise CommandError(f"topic {topic} has no queue to send to")
            body = b"a" * size
            for i in range(amount):
                queue = queues[i % len(queues)]
                started = time.monotonic()
                try:
                    await producer.send(Message(topic, body), queue=queue)
                    ok = True
                except Exception:  # a failed send is a row of the report, as in Java's tool
                    ok = False
                rows.append({"brokerName": queue.broker_name, "queueId": queue.queue_id, "sendResult": ok,
                             "rtMs": round((time.monotonic() - started) * 1000)})
        return rows

    rows = run_admin(namesrv, job)
    # type-ignored: the rows' cells are typed object; rtMs is always an int here
    avg = sum(int(r["rtMs"]) for r in rows[1:]) / (len(rows) - 1)  # type: ignore[call-overload]
    if as_json:
        emit(True, {"topic": topic, "sends": rows, "avgRtMs": avg})
        return
    emit(False, None, ("#Broker Name", "#QID", "#Send Result", "#RT"),
         [(r["brokerName"], r["queueId"], str(r["sendResult"]).lower(), r["rtMs"]) for r in rows])
    typer.echo(f"Avg RT: {avg:.2f}")
