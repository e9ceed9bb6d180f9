"""What every operator CLI shares (mqadmin, mqbench, mqcluster): the ``-n`` option; one-line
errors and the entry point that makes usage errors one line are the daemons' too (remoting.cli)."""

from __future__ import annotations

import typer

from rocketmq_py.remoting.cli import main_entry, one_line

__all__ = ["NamesrvOption", "main_entry", "one_line"]

# RocketMQ's -n, falling back to NAMESRV_ADDR as in Java.
NamesrvOption = typer.Option(None, "-n", "--namesrvAddr", envvar="NAMESRV_ADDR",
                             help="Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'")
