"""queryMsgTraceById: a message's trace records, from our clients or Java's, as Java's mqadmin
prints them (a Pub table, then one Sub table per consumer group); ``--json`` lists every record,
SubBefore and EndTransaction included."""

from __future__ import annotations

from datetime import datetime

import typer

from rocketmq_py.client.trace import RMQ_SYS_TRACE_TOPIC, TraceView, query_trace_by_msg_id
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import CommandError, JsonOption, NamesrvOption, command, emit, run_admin


def _row(kind: str, v: TraceView) -> str:
    when = datetime.fromtimestamp(v.time_stamp / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return f"{kind:<10s} {v.group_name:<20s} {v.client_host:<20s} {when:<20s} {f'{v.cost_time}ms':<10s} {v.status:<10s}"


def print_message_trace(views: list[TraceView]) -> None:
    """Java's printMessageTrace: each Pub with its header, then per consumer group its SubAfter
    records under a Sub header."""
    by_group: dict[str, list[TraceView]] = {}
    for v in views:
        if v.msg_type == "Pub":
            typer.echo(f"{'#Type':<10s} {'#ProducerGroup':<20s} {'#ClientHost':<20s} {'#SendTime':<20s} "
                       f"{'#CostTimes':<10s} {'#Status':<10s}")
            typer.echo(_row("Pub", v))
            typer.echo("")
        elif v.msg_type == "SubAfter":
            by_group.setdefault(v.group_name, []).append(v)
    for group_views in by_group.values():
        typer.echo(f"{'#Type':<10s} {'#ConsumerGroup':<20s} {'#ClientHost':<20s} {'#ConsumerTime':<20s} "
                   f"{'#CostTimes':<10s} {'#Status':<10s}")
        for v in group_views:
            typer.echo(_row("Sub", v))
        typer.echo("")


@command(app, "queryMsgTraceById", "query a message trace")
def query_msg_trace_by_id(
    msg_id: str = typer.Option(..., "-i", "--msgId", help="Message Id"),
    trace_topic: str = typer.Option(RMQ_SYS_TRACE_TOPIC, "-t", "--traceTopic",
                                    help="The name value of message trace topic"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    msg_id, trace_topic = msg_id.strip(), trace_topic.strip()
    if not msg_id:
        raise CommandError("-i msgId is empty")
    views = run_admin(namesrv, lambda admin: query_trace_by_msg_id(admin, trace_topic, msg_id))
    if not views:
        raise CommandError(f"no trace of message {msg_id} in trace topic {trace_topic}")
    if as_json:
        emit(True, [v.to_dict() for v in views])
    else:
        print_message_trace(views)

