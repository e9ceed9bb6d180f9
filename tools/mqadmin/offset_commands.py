"""Consumer offset and group commands: cloneGroupOffset, skipAccumulatedMessage, consumerStatus,
getConsumerConfig, allocateMQ, updateTopicPerm."""

from __future__ import annotations

import json
from typing import Any

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import AllocateMessageQueueAveragely, MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.running_info import ConsumerRunningInfo
from rocketmq_py.common.version import version_desc
from rocketmq_py.remoting.protocol.route import MASTER_ID
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import CommandError, JsonOption, NamesrvOption, command, emit, run_admin
from rocketmq_py.tools.mqadmin.topic_commands import parse_bool

# PermName: 2 write, 4 read, 6 both (updateTopicPerm's -p).
TOPIC_PERMS = (2, 4, 6)


@command(app, "cloneGroupOffset", "clone offset from other group.")
def clone_group_offset(
    src_group: str = typer.Option(..., "-s", "--srcGroup", help="set source consumer group"),
    dest_group: str = typer.Option(..., "-d", "--destGroup", help="set destination consumer group"),
    topic: str = typer.Option(..., "-t", "--topic", help="set the topic"),
    offline: str | None = typer.Option(None, "-o", "--offline",
                                       help="the group or the topic is offline (accepted, unused, as in Java)"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> list[dict[str, object]]:
        # The source group's consume stats over the topics it has offsets in (asked without a
        # topic, as Java asks: with one, a broker answers 0 for queues the group never committed).
        # Java then clones every queue of them; only -t's are cloned here, the topic the
        # command names.
        stats = {mq: w for mq, w in (await admin.examine_consume_stats(src_group)).items() if mq.topic == topic}
        if not stats:
            raise CommandError(f"group {src_group} has no offsets in topic {topic}: nothing to clone")
        masters = await admin._topic_masters(topic)
        cloned = []
        for mq, wrapper in sorted(stats.items()):
            addr = masters.get(mq.broker_name)
            if addr is None or wrapper.consumer_offset < 0:
                continue
            await admin.update_consumer_offset_at(addr, dest_group, mq, wrapper.consumer_offset)
            cloned.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": wrapper.consumer_offset})
        return cloned

    cloned = run_admin(namesrv, job)
    if as_json:
        emit(True, {"srcGroup": src_group, "destGroup": dest_group, "topic": topic, "queues": cloned})
    else:
        typer.echo(f"clone group offset success. srcGroup[{src_group}], destGroup=[{dest_group}], topic[{topic}]")


@command(app, "skipAccumulatedMessage", "Skip all messages that are accumulated (not consumed) currently")
def skip_accumulated_message(
    group: str = typer.Option(..., "-g", "--group", help="set the consumer group"),
    topic: str = typer.Option(..., "-t", "--topic", help="set the topic"),
    force: str = typer.Option("true", "-f", "--force", help="set the force rollback by timestamp switch[true|false]"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    is_force = parse_bool(force, "-f")
    # Java resets to timestamp -1: every queue's max offset.
    result = run_admin(namesrv, lambda a: a.reset_offset_by_timestamp(topic, group, -1, is_force))
    rows = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
            for mq, off in sorted(result.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))]
    if as_json:
        emit(True, {"group": group, "topic": topic, "queues": rows})
        return
    emit(False, None, ("#brokerName", "#queueId", "#offset"),
         [(r["brokerName"], r["queueId"], r["offset"]) for r in rows])


def _running_info_text(info: ConsumerRunningInfo) -> str:
    """ConsumerRunningInfo.formatString's sections: properties, subscriptions, queues, status."""
    lines = ["#Consumer Properties#"]
    lines += [f"{k:<40s}: {v}" for k, v in sorted(info.properties.items())]
    lines += ["", "#Consumer Subscription#"]
    lines += [f"{i:03d} Topic: {s.get('topic', ''):<40s} ClassFilter: {s.get('classFilterMode', False)} "
              f"SubExpression: {s.get('subString', '')}" for i, s in enumerate(info.subscription_set, 1)]
    lines += ["", "#Consumer Offset#", f"{'#Topic':<32s}  {'#Broker Name':<32s}  {'#QID':<4s}  #Consumer Offset"]
    lines += [f"{mq.topic:<32s}  {mq.broker_name:<32s}  {mq.queue_id:<4d}  {pq.get('commitOffset', 0)}"
              for mq, pq in sorted(info.mq_table.items())]
    lines += ["", "#Consumer RT&TPS#"]
    lines += [f"{topic:<32s}  {status}" for topic, status in sorted(info.status_table.items())]
    if info.jstack:
        lines += ["", "#Consumer jstack#", info.jstack]
    return "\n".join(lines)


def _info_dict(info: ConsumerRunningInfo) -> dict[str, object]:
    return {"properties": info.properties, "subscriptionSet": info.subscription_set,
            "mqTable": [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, **pq}
                        for mq, pq in sorted(info.mq_table.items())],
            "statusTable": info.status_table, **({"jstack": info.jstack} if info.jstack else {})}


@command(app, "consumerStatus", "Query consumer's internal data structure")
def consumer_status(
    group: str = typer.Option(..., "-g", "--consumerGroup", help="consumer group name"),
    client_id: str | None = typer.Option(None, "-i", "--clientId", help="The consumer's client id"),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr",
                                           help="broker address (the consumers connected to it)"),
    jstack: bool = typer.Option(False, "-s", "--jstack", help="Run jstack command in the consumer progress"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> dict[str, tuple[int, ConsumerRunningInfo]]:
        connection = await admin.examine_consumer_connection_info(group, broker_addr)
        clients = {c["clientId"]: int(c.get("version", 0)) for c in connection.get("connectionSet", [])}
        if client_id is not None:
            if client_id not in clients:
                raise CommandError(f"client {client_id} is not a connected consumer of group {group} "
                                   f"(connected: {', '.join(sorted(clients)) or 'none'})")
            clients = {client_id: clients[client_id]}
        infos = {}
        for cid, version in sorted(clients.items()):
            infos[cid] = (version, await admin.get_consumer_running_info(group, cid, jstack))
        return infos

    infos = run_admin(namesrv, job)
    if as_json:
        emit(True, {cid: _info_dict(info) for cid, (_, info) in infos.items()})
        return
    if client_id is not None:
        typer.echo(_running_info_text(infos[client_id][1]))
        return
    emit(False, None, ("#Index", "#ClientId", "#Version"),
         [(i, cid, version_desc(version)) for i, (cid, (version, _)) in enumerate(infos.items(), 1)])
    subscriptions = {cid: sorted((s.get("topic"), s.get("subString")) for s in info.subscription_set)
                     for cid, (_, info) in infos.items()}
    if len({tuple(s) for s in subscriptions.values()}) <= 1:
        typer.echo("\n\nSame subscription in the same group of consumer")
        owners: dict[MessageQueue, list[str]] = {}
        for cid, (_, info) in infos.items():
            for mq in info.mq_table:
                owners.setdefault(mq, []).append(cid)
        ok = all(len(c) == 1 for c in owners.values())
        typer.echo(f"\n\nRebalance {'OK' if ok else 'Failed'}")
    else:
        typer.echo("\n\nWARN: Different subscription in the same group of consumer!!!")


@command(app, "getConsumerConfig", "Get consumer config by subscription group name!")
def get_consumer_config(
    group: str = typer.Option(..., "-g", "--groupName", help="subscription group name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> list[dict[str, Any]]:
        info = await admin.examine_broker_cluster_info()
        found: list[dict[str, Any]] = []
        for broker_name, data in sorted(info.brokerAddrTable.items()):
            addrs = data.brokerAddrs
            addr = addrs.get(MASTER_ID) or next(iter(addrs.values()), None)
            if addr is None:
                continue
            config = (await admin.get_all_subscription_groups(addr)).get(group)
            if config is None:
                continue
            cluster = next((c for c, names in info.clusterAddrTable.items() if broker_name in names), "")
            found.append({"clusterName": cluster, "brokerName": broker_name,
                          "subscriptionGroupConfig": config.model_dump(mode="json")})
        if not found:
            raise CommandError(f"subscription group {group} not found on any broker")
        return found

    found = run_admin(namesrv, job)
    if as_json:
        emit(True, found)
        return
    for entry in found:
        typer.echo(f"============================={entry['clusterName']}:{entry['brokerName']}"
                   "=============================")
        for key, value in entry["subscriptionGroupConfig"].items():
            shown = "" if value is None else ("true" if value is True else "false" if value is False else value)
            typer.echo(f"{key:<40s}=  {shown}")


@command(app, "allocateMQ", "Allocate MQ")
def allocate_mq(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    ip_list: str = typer.Option(..., "-i", "--ipList", help="ipList"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    ips = [ip for ip in ip_list.split(",") if ip]
    if not ips:
        raise CommandError("-i takes a comma-separated list of client ids (ips)")

    async def job(admin: Admin) -> list[MessageQueue]:
        route = await admin.examine_topic_route_info(topic)
        # MQClientInstance.topicRouteData2TopicSubscribeInfo: readQueueNums queues of every
        # broker whose queues are readable.
        return sorted(MessageQueue(topic, qd.brokerName, q) for qd in route.queueDatas if qd.perm & 4
                      for q in range(qd.readQueueNums))

    mqs = run_admin(namesrv, job)
    strategy = AllocateMessageQueueAveragely()
    result = {ip: [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}
                   for mq in strategy.allocate("aa", ip, mqs, ips)] for ip in ips}
    # Java prints RebalanceResult as JSON whatever the flags: --json prints it indented.
    if as_json:
        emit(True, {"result": result})
    else:
        typer.echo(json.dumps({"result": result}, separators=(",", ":")))


@command(app, "updateTopicPerm", "Update topic perm")
def update_topic_perm(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    perm: int = typer.Option(..., "-p", "--perm", help="set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]"),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="create topic to which broker"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="create topic to which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    if perm not in TOPIC_PERMS:
        raise CommandError(f"-p must be 2 (write), 4 (read) or 6 (read and write), not {perm}")
    if not broker_addr and not cluster:
        raise CommandError("one of -b brokerAddr or -c clusterName is required")

    async def job(admin: Admin) -> list[dict[str, object]]:
        route = await admin.examine_topic_route_info(topic)
        if not route.queueDatas:
            raise CommandError(f"topic {topic} has no queues in its route")
        if broker_addr:
            name = next((bd.brokerName for bd in route.brokerDatas if bd.brokerAddrs.get(MASTER_ID) == broker_addr),
                        None)
            if name is None:
                raise CommandError("updateTopicPerm error broker not exit or broker is not master!")
            queue = next(qd for qd in route.queueDatas if qd.brokerName == name)
            if queue.perm == perm:
                raise CommandError("new perm equals to the old one!")
            targets = [(broker_addr, queue)]
        else:
            try:
                masters = await admin.broker_addrs(None, cluster)
            except MQClientError as exc:
                raise CommandError(str(exc)) from None
            by_addr = {bd.brokerAddrs.get(MASTER_ID): bd.brokerName for bd in route.brokerDatas}
            first = route.queueDatas[0]
            targets = [(addr, next((qd for qd in route.queueDatas if qd.brokerName == by_addr.get(addr)), first))
                       for addr in masters]
        done = []
        for addr, queue in targets:
            await admin.create_topic(topic, broker_addr=addr, read_queue_nums=queue.readQueueNums,
                                     write_queue_nums=queue.writeQueueNums, perm=perm)
            done.append({"brokerAddr": addr, "oldPerm": queue.perm, "perm": perm})
        return done

    done = run_admin(namesrv, job)
    if as_json:
        emit(True, {"topic": topic, "brokers": done})
        return
    for row in done:
        typer.echo(f"update topic perm from {row['oldPerm']} to {row['perm']} in {row['brokerAddr']} success.")
