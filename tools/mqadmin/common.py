"""What every mqadmin command shares: the ``-n``/``--json`` options, running one Admin session,
turning any failure into one line on stderr with exit code 1, and printing tables or JSON.

RocketMQ's mqadmin prints a stack trace on failure; scripts want a stable exit code and one line
they can grep, so errors here are ``mqadmin <command>: <reason>`` and exit 1.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.tools.cli import NamesrvOption, main_entry, one_line

__all__ = ["NamesrvOption", "main_entry", "one_line"]

T = TypeVar("T")

JsonOption = typer.Option(False, "--json", help="Print JSON instead of a table (for scripts)")

ADMIN_TIMEOUT = 5.0


class CommandError(Exception):
    """A failure the operator can act on; its text is the one line mqadmin prints."""


def console() -> Console:
    # Piped output (scripts, tests) gets a wide console so tables never wrap ids mid-cell.
    return Console(width=None if sys.stdout.isatty() else 250, soft_wrap=False)


def run_admin(namesrv: str | None, job: Callable[[Admin], Awaitable[T]]) -> T:
    """Run ``job`` with a started Admin on a fresh loop; the NameServer list must be known."""
    if not namesrv and not os.environ.get("NAMESRV_ADDR"):
        raise CommandError("no NameServer address: pass -n host:port or set NAMESRV_ADDR")

    async def main() -> T:
        async with Admin(namesrv, timeout=ADMIN_TIMEOUT, instance_name=f"mqadmin-{os.getpid()}") as admin:
            return await job(admin)

    return asyncio.run(main())


def command(app: typer.Typer, name: str, help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``name`` (RocketMQ's spelling) on ``app`` and map its failures to exit code 1."""

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                fn(*args, **kwargs)
            except typer.Exit:
                raise
            except (CommandError, MQClientError, RemotingError, OSError, TimeoutError, ValueError) as exc:
                typer.echo(f"mqadmin {name}: {one_line(exc)}", err=True)
                raise typer.Exit(1) from None
            except Exception as exc:  # an unexpected answer: still one line, with the exception's type
                typer.echo(f"mqadmin {name}: {type(exc).__name__}: {one_line(exc)}", err=True)
                raise typer.Exit(1) from None

        return app.command(name, help=help_text)(run)

    return wrap


def emit(as_json: bool, data: Any, columns: Sequence[str] = (), rows: Sequence[Sequence[Any]] = (),
         title: str | None = None) -> None:
    """``--json``: ``data`` as one JSON document; otherwise a rich table of ``rows``."""
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
        return
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console().print(table)


def emit_kv(as_json: bool, data: dict[str, Any], title: str | None = None) -> None:
    emit(as_json, data, ("key", "value"), sorted(data.items()), title)


def parse_timestamp(text: str) -> int:
    """mqadmin's time formats: ``now``, epoch millis, or ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    text = text.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
    except ValueError:
        raise CommandError(f"bad timestamp {text!r}: use now, epoch millis or yyyy-MM-dd#HH:mm:ss:SSS") from None


def format_ts(millis: int) -> str:
    if millis <= 0:
        return "-"
    return datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
