"""Consumer and producer commands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection, resetOffsetByTime."""

from __future__ import annotations

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupConfig
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import (
    CONNECTION_COLUMNS,
    CommandError,
    JsonOption,
    NamesrvOption,
    command,
    connection_rows,
    emit,
    format_ts,
    parse_timestamp,
    run_admin,
)
from rocketmq_py.tools.mqadmin.topic_commands import parse_bool

# Groups every broker creates for itself; consumerProgress without -g leaves them out, as Java's
# tool does for its system groups.
SYSTEM_GROUP_PREFIXES = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                         "CID_ONSAPI_", "CID_RMQ_SYS_")


def _require_target(broker_addr: str | None, cluster: str | None) -> None:
    if not broker_addr and not cluster:
        raise CommandError("one of -b brokerAddr or -c clusterName is required")


@command(app, "updateSubGroup", "Update or create subscription group")
def update_sub_group(
    group: str = typer.Option(..., "-g", "--groupName", help="consumer group name"),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="target broker"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="target cluster"),
    consume_enable: str = typer.Option("true", "-s", "--consumeEnable", help="consume enable"),
    consume_from_min: str = typer.Option("false", "-m", "--consumeFromMinEnable", help="from min offset"),
    broadcast: str = typer.Option("true", "-d", "--consumeBroadcastEnable", help="broadcast"),
    retry_queue_nums: int = typer.Option(1, "-q", "--retryQueueNums", help="retry queue nums"),
    retry_max_times: int = typer.Option(16, "-r", "--retryMaxTimes", help="retry max times"),
    broker_id: int = typer.Option(0, "-i", "--brokerId", help="consumer from which broker id"),
    slowly_broker_id: int = typer.Option(1, "-w", "--whichBrokerWhenConsumeSlowly", help="which broker id when slow"),
    notify: str = typer.Option("true", "-a", "--notifyConsumerIdsChanged", help="notify consumerId changed"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)
    config = SubscriptionGroupConfig(
        groupName=group, consumeEnable=parse_bool(consume_enable, "-s"),
        consumeFromMinEnable=parse_bool(consume_from_min, "-m"), consumeBroadcastEnable=parse_bool(broadcast, "-d"),
        retryQueueNums=retry_queue_nums, retryMaxTimes=retry_max_times, brokerId=broker_id,
        whichBrokerWhenConsumeSlowly=slowly_broker_id, notifyConsumerIdsChangedEnable=parse_bool(notify, "-a"))

    async def job(admin: Admin) -> list[str]:
        addrs = await admin.broker_addrs(broker_addr, cluster)
        for addr in addrs:
            await admin.create_subscription_group(addr, config)
        return addrs

    addrs = run_admin(namesrv, job)
    if as_json:
        emit(True, {"brokers": addrs, "subscriptionGroupConfig": config.model_dump(mode="json")})
        return
    for addr in addrs:
        typer.echo(f"create subscription group to {addr} success.")
    typer.echo(str(config.model_dump(mode="json")))


@command(app, "deleteSubGroup", "Delete subscription group from broker")
def delete_sub_group(
    group: str = typer.Option(..., "-g", "--groupName", help="subscription group name"),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="target broker"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="target cluster"),
    remove_offset: bool = typer.Option(False, "-r", "--removeOffset", help="also remove the group's offsets"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> list[str]:
        addrs = await admin.broker_addrs(broker_addr, cluster)
        holders = [a for a in addrs if group in await admin.get_all_subscription_groups(a)]
        if not holders:
            raise CommandError(f"subscription group {group} not found on {', '.join(addrs)}")
        for addr in holders:
            await admin.delete_subscription_group(addr, group, remove_offset)
        return holders

    addrs = run_admin(namesrv, job)
    if as_json:
        emit(True, {"brokers": addrs, "groupName": group, "deleted": True})
        return
    for addr in addrs:
        typer.echo(f"delete subscription group [{group}] from broker [{addr}] success.")


@command(app, "consumerProgress", "Query consumers's progress, speed")
def consumer_progress(
    group: str | None = typer.Option(None, "-g", "--groupName", help="consumer group name"),
    topic: str | None = typer.Option(None, "-t", "--topicName", help="topic name"),
    show_client_ip: bool = typer.Option(False, "-s", "--showClientIP", help="show the client owning each queue"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    if group is None:
        _all_groups_progress(namesrv, as_json)
        return

    async def job(admin: Admin) -> tuple[list[dict[str, object]], dict[str, str]]:
        table = await admin.examine_consume_stats(group, topic)
        if not table:
            raise CommandError(f"no consume progress for group {group}{f' on topic {topic}' if topic else ''}")
        owners: dict[str, str] = {}
        if show_client_ip:
            try:
                conn = await admin.examine_consumer_connection_info(group)
                owners = {c["clientId"]: c["clientAddr"] for c in conn.get("connectionSet", [])}
            except Exception:  # offline group: progress is still worth showing
                owners = {}
        rows = [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                 "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset, "diff": w.lag,
                 "lastTimestamp": w.last_timestamp}
                for mq, w in sorted(table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id))]
        return rows, owners

    rows, owners = run_admin(namesrv, job)
    total = sum(int(r["diff"]) for r in rows)  # type: ignore[call-overload]
    if as_json:
        emit(True, {"group": group, "diffTotal": total, "queues": rows,
                    **({"clients": owners} if show_client_ip else {})})
        return
    emit(False, None, ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"),
         [(r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"],
           format_ts(int(r["lastTimestamp"]))) for r in rows])  # type: ignore[call-overload]
    if show_client_ip and owners:
        typer.echo("Clients: " + ", ".join(f"{cid}@{addr}" for cid, addr in sorted(owners.items())))
    typer.echo(f"Diff Total: {total}")


def _all_groups_progress(namesrv: str | None, as_json: bool) -> None:
    async def job(admin: Admin) -> list[dict[str, object]]:
        groups: set[str] = set()
        for addr in await admin.broker_addrs():
            groups |= set(await admin.get_all_subscription_groups(addr))
            groups |= await admin.fetch_consumer_offset_groups(addr)
        rows = []
        for g in sorted(groups):
            if g.startswith(SYSTEM_GROUP_PREFIXES):
                continue
            table = await admin.examine_consume_stats(g)
            try:
                online = len((await admin.examine_consumer_connection_info(g))["connectionSet"])
            except Exception:
                online = 0
            rows.append({"group": g, "count": online, "diffTotal": sum(w.lag for w in table.values())})
        return rows

    rows = run_admin(namesrv, job)
    emit(as_json, rows, ("#Group", "#Count", "#Diff Total"), [(r["group"], r["count"], r["diffTotal"]) for r in rows])


@command(app, "consumerConnection", "Query consumer's socket connection, client version and subscription")
def consumer_connection(
    group: str = typer.Option(..., "-g", "--consumerGroup", help="consumer group name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    info = run_admin(namesrv, lambda a: a.examine_consumer_connection_info(group))
    if as_json:
        emit(True, info)
        return
    emit(False, None, CONNECTION_COLUMNS, connection_rows(info.get("connectionSet", [])))
    emit(False, None, ("#Topic", "#SubExpression"),
         [(t, s.get("subString", "*")) for t, s in sorted(info.get("subscriptionTable", {}).items())])
    typer.echo(f"ConsumeType: {info.get('consumeType')}")
    typer.echo(f"MessageModel: {info.get('messageModel')}")
    typer.echo(f"ConsumeFromWhere: {info.get('consumeFromWhere')}")


@command(app, "producerConnection", "Query producer's socket connection and client version")
def producer_connection(
    group: str = typer.Option(..., "-g", "--producerGroup", help="producer group name"),
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    info = run_admin(namesrv, lambda a: a.examine_producer_connection_info(group, topic))
    emit(as_json, info, CONNECTION_COLUMNS, connection_rows(info["connectionSet"]))


@command(app, "resetOffsetByTime", "Reset consumer offset by timestamp(without client restart)")
def reset_offset_by_time(
    group: str = typer.Option(..., "-g", "--group", help="set the consumer group"),
    topic: str = typer.Option(..., "-t", "--topic", help="set the topic"),
    timestamp: str = typer.Option(..., "-s", "--timestamp",
                                  help="set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    force: str = typer.Option("true", "-f", "--force", help="set the force rollback by timestamp switch[true|false]"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    millis = parse_timestamp(timestamp)
    is_force = parse_bool(force, "-f")
    result = run_admin(namesrv, lambda a: a.reset_offset_by_timestamp(topic, group, millis, is_force))
    rows = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
            for mq, off in sorted(result.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))]
    if as_json:
        emit(True, {"group": group, "topic": topic, "timestamp": millis, "queues": rows})
        return
    typer.echo(f"rollback consumer offset by specified group[{group}], topic[{topic}], force[{is_force}], "
               f"timestamp(string)[{timestamp}], timestamp(long)[{millis}]")
    emit(False, None, ("#brokerName", "#queueId", "#offset"),
         [(r["brokerName"], r["queueId"], r["offset"]) for r in rows])
