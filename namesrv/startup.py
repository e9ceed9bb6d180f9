"""``mqnamesrv``: start a NameServer (Java's NamesrvStartup).

Configuration comes from RocketMQ-style properties (``-c namesrv.conf``), then ``-o key=value``
overrides and the named flags; ``-p`` prints the effective configuration and exits. The home
directory (``ROCKETMQ_HOME`` or ``--home``, else the user's home) holds ``namesrv/kvConfig.json``.
"""

from __future__ import annotations

import logging
import os

import typer

from rocketmq_py.common.cli import config_hint, fail, main_entry, startup_failures
from rocketmq_py.common.daemon import parse_overrides, serve_until_signalled
from rocketmq_py.common.logsetup import default_log_dir, log_config, setup_logging
from rocketmq_py.common.loop import run
from rocketmq_py.common.properties import ConfigError, apply_properties, format_properties, read_properties_file
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.namesrv.controller import NamesrvController
from rocketmq_py.namesrv.metrics import NamesrvMetrics
from rocketmq_py.remoting.header import prepare_header_codecs
from rocketmq_py.remoting.server_config import NettyServerConfig

log = logging.getLogger("rocketmq.namesrv")

app = typer.Typer(add_completion=False, help=__doc__)

PORT_HINT = "pass -l/--listen-port, or 0 for a free port"
METRICS_HINT = "pass -o metricsPort=PORT, 0 for a free port, -1 for none"


def build_config(config_file: str | None, options: list[str], listen_port: int | None,
                 bind_address: str | None, home: str | None) -> tuple[NamesrvConfig, NettyServerConfig]:
    props: dict[str, str] = {"listenPort": "9876"}
    if home:
        props |= {"rocketmqHome": home, "kvConfigPath": os.path.join(home, "namesrv", "kvConfig.json"),
                  "configStorePath": os.path.join(home, "namesrv", "namesrv.properties")}
    if config_file:
        props |= read_properties_file(config_file)
    props |= parse_overrides(options)
    if listen_port is not None:
        props["listenPort"] = str(listen_port)
    if bind_address is not None:
        props["bindAddress"] = bind_address
    (namesrv_config, server_config), unknown = apply_properties([NamesrvConfig, NettyServerConfig], props)
    if unknown:
        log.warning("ignoring unknown config keys: %s", ", ".join(sorted(unknown)))
    # type-ignored: the loader builds each config class it is given, typed as their base
    return namesrv_config, server_config  # type: ignore[return-value]


@app.command()
def main(
    config_file: str | None = typer.Option(None, "-c", "--configFile", help="Name server config properties file"),
    print_config: bool = typer.Option(False, "-p", "--printConfigItem", help="Print all config items and exit"),
    option: list[str] = typer.Option([], "-o", "--option", help="Override one config key: -o key=value"),  # noqa: B008
    listen_port: int | None = typer.Option(None, "-l", "--listen-port", help="Port to listen on (0: any free)"),
    bind_address: str | None = typer.Option(None, "--bind-address", help="Address to listen on"),
    home: str | None = typer.Option(None, "--home", envvar="ROCKETMQ_HOME", help="Home dir for namesrv/ files"),
    log_level: str = typer.Option("INFO", "--log-level", help="Logging level"),
    log_dir: str | None = typer.Option(None, "--log-dir", envvar="ROCKETMQ_LOG_DIR",
                                       help="Where namesrv.log goes (default <rocketmqHome>/logs/rocketmqlogs)"),
) -> None:
    try:
        namesrv_config, server_config = build_config(config_file, option, listen_port, bind_address, home)
    except ConfigError as exc:
        fail("mqnamesrv", exc, config_hint("mqnamesrv"), 2)
    if print_config:
        typer.echo(format_properties(namesrv_config, server_config), nl=False)
        raise typer.Exit(0)
    # A kvConfig.json that neither it nor its backup can parse fails the start: Java's NameServer
    # also refuses to start then, rather than serve with an empty KV table.
    with startup_failures("mqnamesrv", PORT_HINT):
        setup_logging("namesrv", log_level, log_dir or default_log_dir(namesrv_config.rocketmqHome))
        log_config(namesrv_config, server_config)
        controller = NamesrvController(namesrv_config, server_config)
        metrics = (NamesrvMetrics(controller, namesrv_config.metricsPort, server_config.bindAddress)
                   if namesrv_config.metricsPort >= 0 else None)
        run(serve_until_signalled(controller, metrics, METRICS_HINT, lambda: (
            f"The Name Server boot success. serializeType=JSON, address {controller.address}"), prepare_header_codecs))


def cli() -> None:
    """The ``mqnamesrv`` console script: usage errors as one line, like every other failure."""
    main_entry(app, "mqnamesrv")


if __name__ == "__main__":
    cli()
