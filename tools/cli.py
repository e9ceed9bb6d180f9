"""What every operator CLI shares (mqadmin, mqbench, mqcluster): the ``-n`` option; one-line
errors and the entry point that makes usage errors one line are the daemons' too (common.cli)."""

from __future__ import annotations

import typer

from rocketmq_py.common.cli import main_entry, one_line

__all__ = ["NamesrvOption", "hinted", "main_entry", "one_line"]

UNREACHABLE_HINT = "is a NameServer listening there? pass -n host:port or set NAMESRV_ADDR"

# RocketMQ's -n, falling back to NAMESRV_ADDR as in Java.
NamesrvOption = typer.Option(None, "-n", "--namesrvAddr", envvar="NAMESRV_ADDR",
                             help="Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'")


def hinted(exc: BaseException) -> str:
    """The failure as one line, with what to pass instead when no NameServer could be reached (the
    first thing a first run meets: nothing started yet, or another port)."""
    text = one_line(exc)
    unreachable = "NameServer" in text and "connect to <" in text  # RemotingConnectError's wording
    return f"{text}: {UNREACHABLE_HINT}" if unreachable else text
