"""The one typer app every mqadmin command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="mqadmin", add_completion=False, no_args_is_help=True,
    help="RocketMQ's admin commands (updateTopic, clusterList, consumerProgress, ...) against any "
         "NameServer: -n host:port or NAMESRV_ADDR. Every command has --help and --json.")
