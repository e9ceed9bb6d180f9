"""Broker statistics commands: statsAll, brokerConsumeStats, cleanUnusedTopic."""

from __future__ import annotations

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.protocol.route import MASTER_ID
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import (
    CommandError,
    JsonOption,
    NamesrvOption,
    command,
    emit,
    format_ts,
    run_admin,
)
from rocketmq_py.tools.mqadmin.topic_commands import parse_bool


def compute_24hour_sum(stats: dict) -> int:  # type: ignore[type-arg]
    """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        total = int((stats.get(window) or {}).get("sum", 0))
        if total:
            return total
    return 0


async def _stats(admin: Admin, addr: str, name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour sum) of one stat; (0, 0) where the broker never counted it, as
    Java's tool skips a failed look-up."""
    try:
        data = await admin.view_broker_stats_data(addr, name, key)
    except MQClientError:
        return 0.0, 0
    return float((data.get("statsMinute") or {}).get("tps", 0.0)), compute_24hour_sum(data)


async def topic_stats_rows(admin: Admin, topic: str, active_only: bool) -> list[dict[str, object]]:
    """One topic's statsAll rows: per consuming group (or one NO_CONSUMER row), the put and get
    rates of the last minute, the last 24 hours' counts, and the group's accumulation."""
    route = await admin.examine_topic_route_info(topic)
    masters = [bd.brokerAddrs[MASTER_ID] for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs]
    groups = await admin.query_topic_consume_by_who(topic)
    in_tps, in_today = 0.0, 0
    for addr in masters:
        tps, total = await _stats(admin, addr, "TOPIC_PUT_NUMS", topic)
        in_tps, in_today = in_tps + tps, in_today + total
    rows: list[dict[str, object]] = []
    for group in groups:
        out_tps, out_today = 0.0, 0
        for addr in masters:
            tps, total = await _stats(admin, addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps, out_today = out_tps + tps, out_today + total
        try:
            accumulation = sum(w.lag for w in (await admin.examine_consume_stats(group, topic)).values())
        except MQClientError:
            accumulation = 0
        if not active_only or in_today > 0 or out_today > 0:
            rows.append({"topic": topic, "consumerGroup": group, "accumulation": accumulation, "inTps": in_tps,
                         "outTps": out_tps, "inMsg24Hour": in_today, "outMsg24Hour": out_today})
    if not groups and (not active_only or in_today > 0):
        rows.append({"topic": topic, "consumerGroup": None, "accumulation": 0, "inTps": in_tps, "outTps": None,
                     "inMsg24Hour": in_today, "outMsg24Hour": None})
    return rows


@command(app, "statsAll", "Topic and Consumer tps stats")
def stats_all(
    active_topic: bool = typer.Option(False, "-a", "--activeTopic", help="print active topic only"),
    topic: str | None = typer.Option(None, "-t", "--topic", help="print select topic only"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> list[dict[str, object]]:
        topics = await admin.fetch_all_topic_list()
        if topic:
            if topic not in topics:
                raise CommandError(f"topic {topic} not found on the NameServers")
            topics = [topic]
        rows: list[dict[str, object]] = []
        for name in sorted(topics):
            if name.startswith(("%RETRY%", "%DLQ%")):
                continue
            try:
                rows += await topic_stats_rows(admin, name, active_topic)
            except MQClientError:
                continue  # a topic without a route any more: Java's tool skips it too
        return rows

    rows = run_admin(namesrv, job)
    emit(as_json, rows, ("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
                         "#OutMsg24Hour"),
         [(r["topic"], r["consumerGroup"] or "", r["accumulation"], f"{r['inTps']:.2f}",
           "" if r["outTps"] is None else f"{r['outTps']:.2f}", r["inMsg24Hour"],
           "NO_CONSUMER" if r["outMsg24Hour"] is None else r["outMsg24Hour"]) for r in rows])


def _mq_order(key: object) -> tuple[str, str, int]:
    # type-ignored: the keys of an offsetTable are object keys, read as fastjson_read.FrozenKey (as_dict)
    mq = key.as_dict()  # type: ignore[attr-defined]
    return str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"])


@command(app, "brokerConsumeStats", "Fetch broker consume stats data")
def broker_consume_stats(
    broker_addr: str = typer.Option(..., "-b", "--brokerAddr", help="Broker address"),
    timeout_millis: int = typer.Option(50000, "-t", "--timeoutMillis", help="request timeout Millis"),
    level: int = typer.Option(0, "-l", "--level", help="threshold of print diff"),
    order: str = typer.Option("false", "-o", "--order", help="order topic"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    is_order = parse_bool(order, "-o")
    if timeout_millis <= 0:
        raise CommandError(f"-t must be a positive number of milliseconds, not {timeout_millis}")

    async def job(admin: Admin) -> dict:  # type: ignore[type-arg]
        admin.timeout = timeout_millis / 1000
        return await admin.fetch_consume_stats_in_broker(broker_addr, is_order)

    body = run_admin(namesrv, job)
    rows: list[dict[str, object]] = []
    for entry in body.get("consumeStatsList", []):
        for group, per_topic in entry.items():
            for stats in per_topic:
                table = stats.get("offsetTable", {})
                for key in sorted(table, key=_mq_order):
                    topic, broker_name, queue_id = _mq_order(key)
                    offsets = table[key]
                    diff = int(offsets["brokerOffset"]) - int(offsets["consumerOffset"])
                    if diff < level:
                        continue
                    rows.append({"topic": topic, "group": group, "brokerName": broker_name, "queueId": queue_id,
                                 "brokerOffset": int(offsets["brokerOffset"]),
                                 "consumerOffset": int(offsets["consumerOffset"]), "diff": diff,
                                 "lastTimestamp": int(offsets.get("lastTimestamp", 0))})
    total = int(body.get("totalDiff", 0))
    if as_json:
        emit(True, {"brokerAddr": body.get("brokerAddr", broker_addr), "totalDiff": total, "queues": rows})
        return
    # Java prints the queues that were ever consumed (a last timestamp), then the broker's total.
    emit(False, None, ("#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                       "#LastTime"),
         [(r["topic"], r["group"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"],
           format_ts(int(r["lastTimestamp"]))) for r in rows if int(r["lastTimestamp"]) > 0])  # type: ignore[call-overload]
    typer.echo(f"\nDiff Total: {total}")


@command(app, "cleanUnusedTopic", "Clean unused topic on broker")
def clean_unused_topic(
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="Broker address"),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="cluster name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    if not broker_addr and not cluster:
        raise CommandError("one of -b brokerAddr or -c cluster is required")

    async def job(admin: Admin) -> list[str]:
        addrs = await admin.broker_addrs(broker_addr, cluster)
        for addr in addrs:
            await admin.clean_unused_topic(addr)
        return addrs

    addrs = run_admin(namesrv, job)
    if as_json:
        emit(True, {"brokers": addrs, "success": True})
    else:
        typer.echo("success")
