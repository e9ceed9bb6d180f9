"""Message commands: queryMsgById, queryMsgByKey, queryMsgByOffset, printMsg, sendMessage,
consumeMessage."""

from __future__ import annotations

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.message import Message
from rocketmq_py.client.message_track import MessageTrack, message_track_detail
from rocketmq_py.client.producer import Producer
from rocketmq_py.remoting.protocol.message import MessageExt
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import (
    CommandError,
    JsonOption,
    NamesrvOption,
    command,
    emit,
    format_ts,
    parse_timestamp,
    run_admin,
)

MAX_PULL_BATCH = 32


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def message_dict(msg: MessageExt, charset: str = "utf-8", with_body: bool = True) -> dict[str, object]:
    data: dict[str, object] = {
        "msgId": msg.msg_id, "offsetMsgId": msg.offset_msg_id, "topic": msg.topic, "tags": msg.tags,
        "keys": msg.keys, "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset, "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp, "storeTimestamp": msg.store_timestamp,
        "bornHost": _host(msg.born_host), "storeHost": _host(msg.store_host), "sysFlag": msg.sys_flag,
        "properties": msg.properties,
    }
    if with_body:
        data["body"] = msg.body.decode(charset, errors="replace")
    return data


def print_message_detail(msg: MessageExt, as_json: bool, charset: str = "utf-8",
                         tracks: list[MessageTrack] | None = None) -> None:
    """The detail block Java's mqadmin prints for one message (OffsetID, Topic, Tags, ...), then,
    when given, which consumer groups have consumed it."""
    d = message_dict(msg, charset)
    if as_json:
        if tracks is not None:
            d["tracks"] = [{"consumerGroup": t.consumer_group, "trackType": str(t.track_type),
                            "exceptionDesc": t.exception_desc} for t in tracks]
        emit(True, d)
        return
    for label, key in (("OffsetID", "offsetMsgId"), ("MsgId", "msgId"), ("Topic", "topic"), ("Tags", "tags"),
                       ("Keys", "keys"), ("Queue ID", "queueId"), ("Queue Offset", "queueOffset"),
                       ("CommitLog Offset", "commitLogOffset"), ("Reconsume Times", "reconsumeTimes")):
        typer.echo(f"{label + ':':<20s}{d[key] if d[key] is not None else '[]'}")
    typer.echo(f"{'Born Timestamp:':<20s}{format_ts(msg.born_timestamp)}")
    typer.echo(f"{'Store Timestamp:':<20s}{format_ts(msg.store_timestamp)}")
    typer.echo(f"{'Born Host:':<20s}{d['bornHost']}")
    typer.echo(f"{'Store Host:':<20s}{d['storeHost']}")
    typer.echo(f"{'System Flag:':<20s}{msg.sys_flag}")
    typer.echo(f"{'Properties:':<20s}{msg.properties}")
    typer.echo(f"{'Message Body:':<20s}{d['body']}")
    if tracks is not None:
        typer.echo("\n\nWARN: No Consumer" if not tracks else "\n\n" + "".join(str(t) for t in tracks))


async def _with_tracks(admin: Admin, msg: MessageExt) -> tuple[MessageExt, list[MessageTrack] | None]:
    """The message with its consumer tracks; a failure to track is reported, not fatal (Java
    prints the message and the stack trace)."""
    try:
        return msg, await message_track_detail(admin, msg)
    except MQClientError as exc:
        typer.echo(f"message tracking failed: {exc}", err=True)
        return msg, None


@command(app, "queryMsgById", "Query Message by Id")
def query_msg_by_id(
    msg_id: str = typer.Option(..., "-i", "--msgId", help="Message Id: the offset id or the unique key (UNIQ_KEY)"),
    topic: str | None = typer.Option(None, "-t", "--topic",
                                      help="topic of a unique key (without it, every topic is searched)"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> tuple[MessageExt, list[MessageTrack] | None]:
        found = await admin.view_message_or_unique_key(msg_id.strip(), topic)
        if found is None:
            where = f"topic {topic}" if topic else "any topic of the cluster's brokers"
            raise CommandError(f"message {msg_id} not found: no broker holds it as an offset id, "
                               f"nor as a unique key in {where}")
        return await _with_tracks(admin, found)

    msg, tracks = run_admin(namesrv, job)
    print_message_detail(msg, as_json, tracks=tracks)


@command(app, "queryMsgByKey", "Query Message by Key")
def query_msg_by_key(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    key: str = typer.Option(..., "-k", "--msgKey", help="Message Key"),
    begin: str = typer.Option("0", "-b", "--beginTimestamp", help="begin timestamp (millis|yyyy-MM-dd#HH:mm:ss:SSS)"),
    end: str = typer.Option(str(2**63 - 1), "-e", "--endTimestamp", help="end timestamp"),
    max_num: int = typer.Option(64, "-c", "--maxNum", help="the max num of messages"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    begin_ms, end_ms = parse_timestamp(begin), parse_timestamp(end)
    msgs = run_admin(namesrv, lambda a: a.query_message(topic, key, max_num, begin_ms, end_ms))
    if not msgs:
        raise CommandError(f"no message with key {key} in topic {topic}")
    emit(as_json, [message_dict(m, with_body=False) for m in msgs], ("#Message ID", "#QID", "#Offset"),
         [(m.msg_id, m.queue_id, m.queue_offset) for m in msgs])


@command(app, "queryMsgByOffset", "Query Message by offset")
def query_msg_by_offset(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    broker_name: str = typer.Option(..., "-b", "--brokerName", help="Broker Name"),
    queue_id: int = typer.Option(..., "-i", "--queueId", help="Queue Id"),
    offset: int = typer.Option(..., "-o", "--offset", help="Queue Offset"),
    charset: str = typer.Option("utf-8", "-f", "--bodyFormat", help="print message body by the specified format"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> tuple[MessageExt, list[MessageTrack] | None]:
        msg = await admin.query_message_by_offset(topic, broker_name, queue_id, offset)
        if msg is None:
            raise CommandError(f"no message at {broker_name}/{topic}/{queue_id} offset {offset}")
        return await _with_tracks(admin, msg)

    msg, tracks = run_admin(namesrv, job)
    print_message_detail(msg, as_json, charset, tracks)


async def _read_range(admin: Admin, topic: str, broker_name: str | None, queue_id: int | None,
                      begin_ms: int | None, end_ms: int | None, start_offset: int | None,
                      limit: int | None) -> dict[MessageQueue, tuple[list[MessageExt], int]]:
    """Messages of every queue (or one) between two times or from an offset, up to ``limit`` in all;
    per queue also the offset after the last one read (what a consumer would commit)."""
    stats = await admin.examine_topic_stats(topic)
    queues = sorted(mq for mq in stats if (broker_name is None or mq.broker_name == broker_name)
                    and (queue_id is None or mq.queue_id == queue_id))
    if not queues:
        raise CommandError(f"no queue of topic {topic} matches broker {broker_name} queue {queue_id}")
    out: dict[MessageQueue, tuple[list[MessageExt], int]] = {}
    remaining = limit
    for mq in queues:
        lo, hi = stats[mq].min_offset, stats[mq].max_offset
        offset = start_offset if start_offset is not None else (
            await admin.search_offset(mq, begin_ms) if begin_ms else lo)
        stop = await admin.search_offset(mq, end_ms) if end_ms else hi
        read: list[MessageExt] = []
        offset = max(offset, lo)
        while offset < min(stop, hi) and (remaining is None or remaining > 0):
            batch = min(MAX_PULL_BATCH, min(stop, hi) - offset, remaining or MAX_PULL_BATCH)
            msgs, next_offset = await admin.pull_messages(topic, mq.broker_name, mq.queue_id, offset, batch)
            if next_offset <= offset:
                break
            msgs = msgs[:batch]
            read += msgs
            offset = msgs[-1].queue_offset + 1 if msgs else next_offset
            if remaining is not None:
                remaining -= len(msgs)
        out[mq] = (read, offset)
    return out


def _print_messages(found: dict[MessageQueue, tuple[list[MessageExt], int]], as_json: bool, charset: str,
                    print_body: bool) -> None:
    msgs = [m for read, _ in found.values() for m in read]
    if as_json:
        emit(True, [message_dict(m, charset, print_body) for m in msgs])
        return
    for mq, (read, _) in found.items():
        typer.echo(f"[{mq.broker_name}/{mq.queue_id}] {len(read)} message(s)")
        for m in read:
            body = f" BODY: {m.body.decode(charset, errors='replace')}" if print_body else ""
            typer.echo(f"MSGID: {m.msg_id} QUEUE_OFFSET: {m.queue_offset} KEYS: {m.keys or ''} "
                       f"TAGS: {m.tags or ''}{body}")


@command(app, "printMsg", "Print Message Detail")
def print_msg(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    charset: str = typer.Option("utf-8", "-c", "--charsetName", help="CharsetName(eg: UTF-8,GBK)"),
    sub_expression: str = typer.Option("*", "-s", "--subExpression", help="Subscribe Expression(eg: TagA || TagB)"),
    begin: str | None = typer.Option(None, "-b", "--beginTimestamp", help="Begin timestamp"),
    end: str | None = typer.Option(None, "-e", "--endTimestamp", help="End timestamp"),
    print_body: str = typer.Option("true", "-d", "--printBody", help="print body"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    begin_ms = parse_timestamp(begin) if begin else None
    end_ms = parse_timestamp(end) if end else None
    tags = None if sub_expression.strip() == "*" else {t.strip() for t in sub_expression.split("||")}
    found = run_admin(namesrv, lambda a: _read_range(a, topic, None, None, begin_ms, end_ms, None, None))
    if tags is not None:
        found = {mq: ([m for m in read if m.tags in tags], nxt) for mq, (read, nxt) in found.items()}
    _print_messages(found, as_json, charset, print_body.lower() != "false")


@command(app, "sendMessage", "Send a message")
def send_message(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name"),
    body: str = typer.Option(..., "-p", "--body", help="UTF-8 string format of the message body"),
    keys: str | None = typer.Option(None, "-k", "--key", help="Message keys"),
    tags: str | None = typer.Option(None, "-c", "--tags", help="Message tags"),
    broker_name: str | None = typer.Option(None, "-b", "--broker", help="Send message to target broker"),
    queue_id: int | None = typer.Option(None, "-i", "--qid", help="Send message to target queue"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    if queue_id is not None and broker_name is None:
        raise CommandError("-i qid needs -b broker")

    async def job(admin: Admin) -> dict[str, object]:
        async with Producer("PID_MQADMIN_SEND", admin.config.namesrv_addr, retry_times_when_send_failed=1) as p:
            queue = None
            if broker_name is not None:
                queues = [q for q in await p.fetch_publish_message_queues(topic) if q.broker_name == broker_name]
                if queue_id is not None:
                    queues = [q for q in queues if q.queue_id == queue_id]
                if not queues:
                    raise CommandError(f"topic {topic} has no queue on broker {broker_name}"
                                       f"{f' with id {queue_id}' if queue_id is not None else ''}")
                queue = queues[0]
            result = await p.send(Message(topic, body.encode(), tags=tags, keys=keys), queue=queue)
        return {"brokerName": result.message_queue.broker_name, "queueId": result.message_queue.queue_id,
                "sendStatus": result.send_status.value, "msgId": result.msg_id,
                "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset}

    r = run_admin(namesrv, job)
    emit(as_json, r, ("#Broker Name", "#QID", "#Send Result", "#MsgId"),
         [(r["brokerName"], r["queueId"], r["sendStatus"], r["msgId"])])


@command(app, "consumeMessage", "Consume message")
def consume_message(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name"),
    broker_name: str | None = typer.Option(None, "-b", "--brokerName", help="Broker name"),
    offset: int | None = typer.Option(None, "-o", "--offset", help="Queue offset to start from"),
    queue_id: int | None = typer.Option(None, "-i", "--queueId", help="Queue Id"),
    group: str | None = typer.Option(None, "-g", "--consumerGroup",
                                     help="Consumer group: start at its committed offsets and commit what was read"),
    begin: str | None = typer.Option(None, "-s", "--beginTimestamp", help="Begin timestamp"),
    end: str | None = typer.Option(None, "-e", "--endTimestamp", help="End timestamp"),
    count: int = typer.Option(128, "-c", "--MessageNumber", help="Number of messages to be consumed"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    """Read messages with raw pulls. With ``-g``, each queue starts at the group's committed offset
    and the offsets reached are committed, so ``consumerProgress -g`` shows the consumption."""
    if count <= 0:
        raise CommandError("-c must be positive")
    if offset is not None and (broker_name is None or queue_id is None):
        raise CommandError("-o offset needs -b brokerName and -i queueId")
    begin_ms = parse_timestamp(begin) if begin else None
    end_ms = parse_timestamp(end) if end else None

    async def job(admin: Admin) -> dict[MessageQueue, tuple[list[MessageExt], int]]:
        start = offset
        if group is not None and start is None and begin_ms is None:
            committed = await admin.examine_consume_stats(group, topic)
            found: dict[MessageQueue, tuple[list[MessageExt], int]] = {}
            remaining = count
            for mq in sorted(await admin.examine_topic_stats(topic)):
                if broker_name and mq.broker_name != broker_name:
                    continue
                if queue_id is not None and mq.queue_id != queue_id:
                    continue
                begin_at = committed[mq].consumer_offset if mq in committed else None
                part = await _read_range(admin, topic, mq.broker_name, mq.queue_id, None, end_ms, begin_at,
                                         remaining)
                found |= part
                remaining -= sum(len(read) for read, _ in part.values())
                if remaining <= 0:
                    break
        else:
            found = await _read_range(admin, topic, broker_name, queue_id, begin_ms, end_ms, start, count)
        if group is not None:
            for mq, (_, next_offset) in found.items():
                await admin.update_consumer_offset(group, mq, next_offset)
        return found

    found = run_admin(namesrv, job)
    _print_messages(found, as_json, "utf-8", True)
    if not as_json:
        typer.echo(f"Consumed {sum(len(r) for r, _ in found.values())} message(s)")
