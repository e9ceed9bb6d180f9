"""What every command line shares, daemons and operator tools alike: a failure is one line on
stderr, ``<prog>: <what happened>: <what to pass instead>``, never a traceback.

A first run meets a handful of failures (a port taken, a store another process holds, a config
key misspelled); each CLI names the option that gets past it, and usage errors (an unknown flag,
a value that is not a number) are one line too, not click's framed box.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import NoReturn

import typer

from rocketmq_py.common.exceptions import AddressInUseError


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def fail(prog: str, exc: BaseException | str, hint: str = "", code: int = 1) -> NoReturn:
    """Exit with ``code`` after printing the failure, and the hint when there is one, as one line."""
    text = one_line(exc) if isinstance(exc, BaseException) else " ".join(exc.split())
    typer.echo(f"{prog}: {text}" + (f": {hint}" if hint else ""), err=True)
    raise SystemExit(code)


def main_entry(app: typer.Typer, prog: str) -> None:
    """Run ``app`` so that usage errors (unknown flag, missing option) are one line too."""
    cmd = typer.main.get_command(app)
    try:
        rc = cmd.main(args=sys.argv[1:], prog_name=prog, standalone_mode=False)
    except Exception as exc:  # click's UsageError/ClickException (typer may vendor click)
        if type(exc).__name__ == "NoArgsIsHelpError":
            # A bare command: the help is what was asked for (click prints it on raising).
            sys.exit(0)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            where = f"{prog} {ctx.info_name}" if ctx is not None and ctx.info_name != prog else prog
            typer.echo(f"{where}: {one_line(Exception(exc.format_message()))}", err=True)
            sys.exit(exc.exit_code)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)


def config_hint(prog: str) -> str:
    """Where to look when a config file or key is refused: the printed keys and the shipped files."""
    from rocketmq_py.conf import CONF_DIR  # data package; imported late, only on this error path

    return f"check -c and -o ({prog} -p prints every key; example files in {CONF_DIR})"


@contextlib.contextmanager
def startup_failures(prog: str, port_hint: str,
                     hints: Mapping[type[Exception], str] | None = None) -> Iterator[None]:
    """A daemon's start and run with each failure met on a first run as one line, exit code 1.

    A port in use names the option that moves it (``port_hint``, unless the error carries its own,
    as the metrics exporter's does); a failure of a kind in ``hints`` (an OSError, RuntimeError or
    ValueError kind, such as the store's lock being held) is followed by its hint; any other of
    those kinds (a file it cannot read, a table it cannot parse) is "cannot start: <why>". Every
    daemon CLI and ``mqstandalone`` answer alike, whichever of them meets the failure.
    """
    try:
        yield
    except AddressInUseError as exc:
        fail(prog, exc, exc.hint or port_hint)
    except (OSError, RuntimeError, ValueError) as exc:
        for kind, hint in (hints or {}).items():
            if isinstance(exc, kind):
                fail(prog, exc, hint)
        fail(prog, f"cannot start: {one_line(exc)}")
