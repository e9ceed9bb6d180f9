"""What every operator CLI shares (mqadmin, mqbench, mqcluster): the ``-n`` option, one-line
errors, and an entry point that turns usage errors into one line too."""

from __future__ import annotations

import sys

import typer

# RocketMQ's -n, falling back to NAMESRV_ADDR as in Java.
NamesrvOption = typer.Option(None, "-n", "--namesrvAddr", envvar="NAMESRV_ADDR",
                             help="Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'")


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def main_entry(app: typer.Typer, prog: str) -> None:
    """Run ``app`` so that usage errors (unknown flag, missing option) are one line too."""
    cmd = typer.main.get_command(app)
    try:
        rc = cmd.main(args=sys.argv[1:], prog_name=prog, standalone_mode=False)
    except Exception as exc:  # click's UsageError/ClickException (typer may vendor click)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            where = f"{prog} {ctx.info_name}" if ctx is not None and ctx.info_name != prog else prog
            typer.echo(f"{where}: {one_line(Exception(exc.format_message()))}", err=True)
            sys.exit(exc.exit_code)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)
