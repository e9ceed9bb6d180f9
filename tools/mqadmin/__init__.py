"""``mqadmin``: RocketMQ's admin commands against any NameServer (``-n`` or ``NAMESRV_ADDR``)."""

from __future__ import annotations

from rocketmq_py.tools import benchmark
from rocketmq_py.tools.mqadmin import (
    acl_commands,
    cluster_commands,
    consumer_commands,
    message_commands,
    namesrv_commands,
    offset_commands,
    queue_commands,
    stats_commands,
    topic_commands,
    trace_commands,
)
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import main_entry

# `mqadmin benchmark produce|consume` is mqbench under mqadmin, for those who look for it there.
app.add_typer(benchmark.app, name="benchmark", help="Benchmark producer and consumer (same as mqbench)")

__all__ = ["acl_commands", "app", "cluster_commands", "consumer_commands", "main", "message_commands",
           "namesrv_commands", "offset_commands", "queue_commands", "stats_commands", "topic_commands",
           "trace_commands"]


def main() -> None:
    main_entry(app, "mqadmin")
