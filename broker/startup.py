"""``mqbroker``: start a Broker (Java's BrokerStartup).

Configuration: RocketMQ-style properties (``-c broker.conf``) holding broker, network and store
keys side by side, then ``-o key=value`` overrides and the named flags; ``-n`` sets the NameServer
list (also read from ``NAMESRV_ADDR``); ``-p`` prints the effective configuration and exits.
"""

from __future__ import annotations

import logging
import os

import typer

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import BrokerController
from rocketmq_py.broker.metrics import BrokerMetrics
from rocketmq_py.common.build import build_name
from rocketmq_py.common.cli import config_hint, fail, main_entry, startup_failures
from rocketmq_py.common.daemon import parse_overrides, serve_until_signalled
from rocketmq_py.common.logsetup import default_log_dir, log_config, setup_logging
from rocketmq_py.common.loop import run
from rocketmq_py.common.properties import ConfigError, apply_properties, format_properties, read_properties_file
from rocketmq_py.remoting.header import prepare_header_codecs
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import BrokerRole, MessageStoreConfig
from rocketmq_py.store.message_store import StoreLockedError

log = logging.getLogger("rocketmq.broker")

app = typer.Typer(add_completion=False, help=__doc__)

PORT_HINT = "pass -l/--listen-port, or 0 for a free port"
METRICS_HINT = "pass -o metricsPort=PORT, 0 for a free port, -1 for none"
LOCKED_HINT = "stop the broker using it, or pass --store DIR"


def build_config(config_file: str | None, options: list[str], namesrv_addr: str | None, listen_port: int | None,
                 store_root: str | None) -> tuple[BrokerConfig, NettyServerConfig, MessageStoreConfig]:
    props: dict[str, str] = {"listenPort": "10911"}
    if config_file:
        props |= read_properties_file(config_file)
    props |= parse_overrides(options)
    if namesrv_addr is not None:
        props["namesrvAddr"] = namesrv_addr
    if listen_port is not None:
        props["listenPort"] = str(listen_port)
    if store_root is not None:
        props["storePathRootDir"] = store_root
    built, unknown = apply_properties([BrokerConfig, NettyServerConfig, MessageStoreConfig], props)
    if unknown:
        log.warning("ignoring unknown config keys: %s", ", ".join(sorted(unknown)))
    broker_config, server_config, store_config = built[0], built[1], built[2]
    assert isinstance(broker_config, BrokerConfig) and isinstance(server_config, NettyServerConfig)
    assert isinstance(store_config, MessageStoreConfig)
    # Java's BrokerStartup: a master is brokerId 0, a slave must say which one it is, and the HA
    # port is the listen port + 1 whatever the config says (any free one with listenPort 0).
    if store_config.brokerRole is BrokerRole.SLAVE:
        if broker_config.brokerId <= 0:
            raise ConfigError("Slave's brokerId must be > 0")
    else:
        broker_config.brokerId = 0
    store_config.haListenPort = server_config.listenPort + 1 if server_config.listenPort else 0
    return broker_config, server_config, store_config


def boot_message(controller: BrokerController) -> str:
    cfg = controller.broker_config
    return (f"The broker[{cfg.brokerName}, {controller.broker_addr}] boot success. serializeType=JSON and name "
            f"server is {cfg.namesrvAddr}")


@app.command()
def main(
    config_file: str | None = typer.Option(None, "-c", "--configFile", help="Broker config properties file"),
    print_config: bool = typer.Option(False, "-p", "--printConfigItem", help="Print all config items and exit"),
    namesrv_addr: str | None = typer.Option(None, "-n", "--namesrvAddr", envvar="NAMESRV_ADDR",
                                            help="Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"),
    option: list[str] = typer.Option([], "-o", "--option", help="Override one config key: -o key=value"),  # noqa: B008
    listen_port: int | None = typer.Option(None, "-l", "--listen-port", help="Port to listen on (0: any free)"),
    store_root: str | None = typer.Option(None, "--store", help="storePathRootDir"),
    log_level: str = typer.Option("INFO", "--log-level", help="Logging level"),
    log_dir: str | None = typer.Option(None, "--log-dir", envvar="ROCKETMQ_LOG_DIR",
                                       help="Where broker.log goes (default <rocketmqHome>/logs/rocketmqlogs)"),
) -> None:
    try:
        broker_config, server_config, store_config = build_config(config_file, option, namesrv_addr, listen_port,
                                                                  store_root)
    except ConfigError as exc:
        fail("mqbroker", exc, config_hint("mqbroker"), 2)
    if print_config:
        typer.echo(format_properties(broker_config, server_config, store_config), nl=False)
        raise typer.Exit(0)
    with startup_failures("mqbroker", PORT_HINT, {StoreLockedError: LOCKED_HINT}):
        setup_logging("broker", log_level, log_dir or default_log_dir(broker_config.rocketmqHome))
        log_config(broker_config, server_config, store_config)
        log.info("hot modules: %s", build_name())
        controller = BrokerController(broker_config, server_config, store_config)
        metrics = (BrokerMetrics(controller, broker_config.metricsPort, server_config.bindAddress)
                   if broker_config.metricsPort >= 0 else None)
        run(serve_until_signalled(controller, metrics, METRICS_HINT, lambda: boot_message(controller),
                                  prepare_header_codecs))


def cli() -> None:
    """The ``mqbroker`` console script: usage errors as one line, like every other failure."""
    main_entry(app, "mqbroker")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    cli()
