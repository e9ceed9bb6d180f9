"""Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus."""

from __future__ import annotations

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.remoting.protocol.topic import PermName
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


def parse_bool(text: str, flag: str) -> bool:
    """mqadmin takes booleans as values (``-o true``), like Java's Boolean.parseBoolean, but a
    typo is an error here rather than a silent false."""
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise CommandError(f"{flag} takes true or false, not {text!r}")
    return lowered == "true"


@command(app, "updateTopic", "Update or create topic")
def update_topic(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="create topic to which broker"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="create topic to which cluster"),
    read_queue_nums: int = typer.Option(8, "-r", "--readQueueNums", help="set read queue nums"),
    write_queue_nums: int = typer.Option(8, "-w", "--writeQueueNums", help="set write queue nums"),
    perm: int = typer.Option(6, "-p", "--perm", help="set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"),
    order: str = typer.Option("false", "-o", "--order", help="set topic's order(true|false)"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    if not broker_addr and not cluster:
        raise CommandError("one of -b brokerAddr or -c clusterName is required")
    if perm not in (PermName.PERM_READ, PermName.PERM_WRITE, PermName.PERM_READ | PermName.PERM_WRITE):
        raise CommandError(f"-p must be 2, 4 or 6, not {perm}")
    is_order = parse_bool(order, "-o")
    targets = run_admin(namesrv, lambda a: a.create_topic(
        topic, cluster=None if broker_addr else cluster, broker_addr=broker_addr, read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums, perm=perm, order=is_order))
    config = {"topicName": topic, "readQueueNums": read_queue_nums, "writeQueueNums": write_queue_nums,
              "perm": perm, "order": is_order}
    if as_json:
        emit(True, {"brokers": targets, "topicConfig": config})
        return
    for addr in targets:
        typer.echo(f"create topic to {addr} success.")
    typer.echo(f"TopicConfig {config}")


@command(app, "deleteTopic", "Delete topic from broker and NameServer")
def delete_topic(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    cluster: str = typer.Option(..., "-c", "--clusterName", help="delete topic from which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> None:
        if topic not in await admin.fetch_all_topic_list():
            raise CommandError(f"topic {topic} does not exist")
        await admin.delete_topic(topic, cluster)

    run_admin(namesrv, job)
    if as_json:
        emit(True, {"topic": topic, "cluster": cluster, "deleted": True})
    else:
        typer.echo(f"delete topic [{topic}] from cluster [{cluster}] success.")


@command(app, "topicList", "Fetch all topic list from name server")
def topic_list(
    cluster_mode: bool = typer.Option(False, "-c", "--clusterModel",
                                      help="print the cluster and the consumer groups of every topic"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> list[dict[str, str]]:
        topics = sorted(await admin.fetch_all_topic_list())
        if not cluster_mode:
            return [{"topic": t} for t in topics]
        info = await admin.examine_broker_cluster_info()
        cluster_of = {b: c for c, names in info.clusterAddrTable.items() for b in names}
        rows: list[dict[str, str]] = []
        for t in topics:
            if t.startswith(("%RETRY%", "%DLQ%")):  # as Java's topicList -c
                continue
            try:
                route = await admin.examine_topic_route_info(t)
                groups = await admin.query_topic_consume_by_who(t)
            except Exception:  # a topic whose route vanished between the two calls
                continue
            clusters = ",".join(sorted({cluster_of.get(bd.brokerName, bd.cluster) for bd in route.brokerDatas}))
            # One row per consumer group, one with no group for a topic nobody consumes (Java's form).
            rows.extend({"topic": t, "cluster": clusters, "consumerGroup": g} for g in groups or [""])
        return rows

    rows = run_admin(namesrv, job)
    if as_json:
        emit(True, rows if cluster_mode else [r["topic"] for r in rows])
    elif cluster_mode:
        emit(False, rows, ("#Cluster Name", "#Topic", "#Consumer Group"),
             [(r["cluster"], r["topic"], r["consumerGroup"]) for r in rows])
    else:
        for r in rows:
            typer.echo(r["topic"])


@command(app, "topicRoute", "Examine topic route info")
def topic_route(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    route = run_admin(namesrv, lambda a: a.examine_topic_route_info(topic))
    if as_json:
        emit(True, route.model_dump(mode="json", exclude_none=True))
        return
    emit(False, None, ("#Broker Name", "#Cluster", "#Broker Addrs"),
         [(bd.brokerName, bd.cluster, " ".join(f"{i}:{a}" for i, a in sorted(bd.brokerAddrs.items())))
          for bd in route.brokerDatas], title=f"{topic} brokers")
    emit(False, None, ("#Broker Name", "#Read Queues", "#Write Queues", "#Perm"),
         [(q.brokerName, q.readQueueNums, q.writeQueueNums, q.perm) for q in route.queueDatas],
         title=f"{topic} queues")


@command(app, "topicStatus", "Examine topic status info")
def topic_status(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    stats = run_admin(namesrv, lambda a: a.examine_topic_stats(topic))
    ordered = sorted(stats.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    data = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": s.min_offset,
             "maxOffset": s.max_offset, "lastUpdateTimestamp": s.last_update_timestamp} for mq, s in ordered]
    emit(as_json, data, ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"),
         [(mq.broker_name, mq.queue_id, s.min_offset, s.max_offset, format_ts(s.last_update_timestamp))
          for mq, s in ordered])
