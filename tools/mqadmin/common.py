"""What every mqadmin command shares: the ``-n``/``--json`` options, running one Admin session,
turning any failure into one line on stderr with exit code 1, and printing tables or JSON.

RocketMQ's mqadmin prints a stack trace on failure; scripts want a stable exit code and one line
they can grep, so errors here are ``mqadmin <command>: <reason>`` and exit 1.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.tools.cli import NamesrvOption, hinted, main_entry, one_line

__all__ = ["NamesrvOption", "main_entry", "one_line"]

T = TypeVar("T")

JsonOption = typer.Option(False, "--json", help="Print JSON instead of a table (for scripts)")

ADMIN_TIMEOUT = 5.0

# The ACL account of this run: --ak/--sk on any command, else ROCKETMQ_HOME/conf/tools.yml's
# accessKey and secretKey (where Java's mqadmin reads them, AclUtils.getAclRPCHook).
_credentials: contextvars.ContextVar[SessionCredentials | None] = contextvars.ContextVar("mqadmin_credentials",
                                                                                      default=None)
# --tls: every connection TLS (Java's mqadmin: -Dtls.enable=true)
_use_tls: contextvars.ContextVar[bool] = contextvars.ContextVar("mqadmin_tls", default=False)
TOOLS_FILE = os.path.join("conf", "tools.yml")


def tools_file_credentials() -> SessionCredentials | None:
    """The account of ``$ROCKETMQ_HOME/conf/tools.yml``; None when there is no such file or it
    names no account (Java then sends unsigned requests too)."""
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None
    path = os.path.join(home, TOOLS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            import yaml  # imported only when the file exists

            data = yaml.safe_load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read {path}: {one_line(exc)}") from None
    if not isinstance(data, dict) or not data.get("accessKey") or not data.get("secretKey"):
        return None
    return SessionCredentials(str(data["accessKey"]), str(data["secretKey"]))


def _session_credentials(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    if access_key is None and secret_key is None:
        return tools_file_credentials()
    if not access_key or not secret_key:
        raise CommandError("--ak and --sk go together: pass both (an ACL account's accessKey and secretKey)")
    return SessionCredentials(access_key, secret_key)


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
        async with Admin(namesrv, timeout=ADMIN_TIMEOUT, instance_name=f"mqadmin-{os.getpid()}",
                         session_credentials=_credentials.get(), use_tls=_use_tls.get()) as admin:
            return await job(admin)

    return asyncio.run(main())


_ACL_PARAMETERS = [
    inspect.Parameter("signing_access_key", inspect.Parameter.KEYWORD_ONLY, annotation=str | None,
                      default=typer.Option(None, "--ak", help="ACL accessKey to sign requests with")),
    inspect.Parameter("signing_secret_key", inspect.Parameter.KEYWORD_ONLY, annotation=str | None,
                      default=typer.Option(None, "--sk", help="ACL secretKey of --ak")),
    inspect.Parameter("tls_enable", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                      default=typer.Option(False, "--tls", help="TLS to the NameServers and brokers (tls.enable)")),
]


def command(app: typer.Typer, name: str, help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``name`` (RocketMQ's spelling) on ``app`` and map its failures to exit code 1."""

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> None:
            access_key = kwargs.pop("signing_access_key", None)
            secret_key = kwargs.pop("signing_secret_key", None)
            tls_token = _use_tls.set(bool(kwargs.pop("tls_enable", False)))
            try:
                token = _credentials.set(_session_credentials(access_key, secret_key))
                try:
                    fn(*args, **kwargs)
                finally:
                    _credentials.reset(token)
                    _use_tls.reset(tls_token)
            except typer.Exit:
                raise
            except (CommandError, MQClientError, RemotingError, OSError, TimeoutError, ValueError) as exc:
                typer.echo(f"mqadmin {name}: {hinted(exc)}", err=True)
                raise typer.Exit(1) from None
            except Exception as exc:  # an unexpected answer: still one line, with the exception's type
                typer.echo(f"mqadmin {name}: {type(exc).__name__}: {one_line(exc)}", err=True)
                raise typer.Exit(1) from None

        # Every command takes the ACL account's and TLS flags, without each command declaring them.
        sig = inspect.signature(fn)
        # type-ignored: typer reads __signature__, which functions do not declare
        run.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *_ACL_PARAMETERS])  # type: ignore[attr-defined]
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


_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)\.[0-9]+([eE][-+]?[0-9]+)?")


def typed(value: Any) -> Any:
    """A string map's values (Java's Properties and KVTable carry every value as text) as JSON
    types for ``--json``: integers and decimals as numbers, true/false as booleans, text kept
    (a leading zero, as deleteWhen's "04", stays text), inside dicts and lists too."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, str):
        if _INT.fullmatch(value):
            return int(value)
        if _FLOAT.fullmatch(value):
            return float(value)
        if value in ("true", "false"):
            return value == "true"
    return value


def emit_kv(as_json: bool, data: dict[str, Any], title: str | None = None) -> None:
    emit(as_json, data, ("key", "value"), sorted(data.items()), title)


def emit_configs(as_json: bool, configs: dict[str, dict[str, str]]) -> None:
    """Each server's properties under a ``====<addr>====`` line, key and value aligned, as Java's
    getBrokerConfig and getNamesrvConfig print them; ``--json``: typed values per server."""
    if as_json:
        emit(True, typed(configs))
        return
    for addr, props in configs.items():
        typer.echo(f"============{addr}============")
        for key, value in sorted(props.items()):
            typer.echo(f"{key:<50s}=  {value}")


CONNECTION_COLUMNS = ("#", "#ClientId", "#ClientAddr", "#Language", "#Version")


def connection_rows(connections: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A connection set's rows under CONNECTION_COLUMNS (consumerConnection, producerConnection)."""
    return [(i, c["clientId"], c["clientAddr"], c["language"], c["version"]) for i, c in enumerate(connections, 1)]


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
