"""``mqstandalone``: the README's run command -- a NameServer and a Broker in one process.

Both run on one event loop with an embedded data dir (``~/.rocketmq-py/standalone`` unless told
otherwise). After boot it proves the whole path with a real client over loopback: it sends a few
messages to ``DemoTopic`` through the broker, reads them back with a pull, and prints them; then
it keeps serving until interrupted, so official clients and tools can be pointed at it.
"""

from __future__ import annotations

import asyncio
import os
import time

import typer

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import BrokerController
from rocketmq_py.broker.metrics import BrokerMetrics
from rocketmq_py.common.cli import fail, main_entry, startup_failures
from rocketmq_py.common.daemon import parse_overrides, raise_open_file_limit, wait_for_stop_signal
from rocketmq_py.common.logsetup import default_log_dir, setup_logging
from rocketmq_py.common.loop import run
from rocketmq_py.common.metrics import MetricsHttpServer, start_exporter
from rocketmq_py.common.properties import ConfigError, apply_properties
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.namesrv.controller import NamesrvController
from rocketmq_py.namesrv.metrics import NamesrvMetrics
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.broker import (
    FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketmq_py.remoting.protocol.message import decode_records, properties_to_string
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.store.message_store import StoreLockedError
from rocketmq_py.tools.dashboard import missing_dependencies

app = typer.Typer(add_completion=False, help=__doc__)

DEFAULT_HOME = os.path.join(os.path.expanduser("~"), ".rocketmq-py", "standalone")
DEMO_TOPIC = "DemoTopic"

PORT_HINT = "pass --port/--broker-port, or 0 for free ports"
METRICS_HINT = "pass --metrics-port, 0 for a free port, -1 for none"
LOCKED_HINT = "stop the mqstandalone using it, or pass --home DIR"


async def _demo(namesrv_addr: str, broker_addr: str) -> None:
    client = RemotingClient()
    try:
        offsets = []
        for i in range(3):
            header = SendMessageRequestHeader(
                producerGroup="demo_producer", topic=DEMO_TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4,
                queueId=0, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
                properties=properties_to_string({"TAGS": "demo", "KEYS": f"demo-{i}"}))
            sent = await client.invoke(broker_addr, RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(header),
                f"hello rocketmq-py #{i}".encode()), 5)
            if sent.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"demo send failed: {sent.code} {sent.remark}")
            offsets.append(int((sent.ext_fields or {})["queueOffset"]))
        print(f"demo: sent 3 messages to {DEMO_TOPIC} queue 0 at offsets {offsets}")
        pull = PullMessageRequestHeader(consumerGroup="demo_consumer", topic=DEMO_TOPIC, queueId=0,
                                        queueOffset=offsets[0], maxMsgNums=3, sysFlag=FLAG_SUBSCRIPTION,
                                        commitOffset=0, suspendTimeoutMillis=0, subVersion=0, subscription="*")
        got = await client.invoke(broker_addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull), 5)
        for msg in decode_records(got.body or b"", decompress=True):
            print(f"demo: pulled offset {msg.queue_offset}: {msg.body.decode()!r} keys={msg.keys}")
        route = await client.invoke(namesrv_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                          {"topic": DEMO_TOPIC}), 5)
        print(f"demo: route of {DEMO_TOPIC} from the NameServer -> code {route.code}")
    finally:
        await client.close()


def broker_configs(host: str, broker_port: int, home: str, options: list[str]
                   ) -> tuple[BrokerConfig, NettyServerConfig, MessageStoreConfig]:
    """The embedded broker's configuration: the standalone's defaults, then ``-o key=value``
    overrides of any broker or store key (``-o enablePropertyFilter=true``), then the flags."""
    props: dict[str, str] = {"rocketmqHome": home, "brokerName": "broker-a",
                             "brokerIP1": host if host != "0.0.0.0" else "127.0.0.1",
                             "storePathRootDir": os.path.join(home, "store")}
    props |= parse_overrides(options)
    props |= {"listenPort": str(broker_port), "bindAddress": host}
    built, unknown = apply_properties([BrokerConfig, NettyServerConfig, MessageStoreConfig], props)
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown))}")
    # type-ignored: the loader builds each config class it is given, typed as their base
    return built[0], built[1], built[2]  # type: ignore[return-value]


async def _serve(host: str, port: int, broker_setup: tuple[BrokerConfig, NettyServerConfig, MessageStoreConfig],
                 home: str, demo_only: bool, metrics_port: int = -1, dashboard_port: int = -1) -> None:
    # Handlers first, as every daemon's (common/daemon.py): a SIGTERM sent once the boot lines are
    # out, while the demo still runs, then shuts down cleanly instead of killing the process.
    stop = wait_for_stop_signal()
    namesrv = NamesrvController(
        NamesrvConfig(rocketmqHome=home, kvConfigPath=os.path.join(home, "namesrv", "kvConfig.json"),
                      configStorePath=os.path.join(home, "namesrv", "namesrv.properties")),
        NettyServerConfig(listenPort=port, bindAddress=host))
    await namesrv.start()
    print(f"The Name Server boot success. serializeType=JSON, address {namesrv.address}", flush=True)
    broker_config, server_config, store_config = broker_setup
    broker_config.namesrvAddr = namesrv.address
    broker = BrokerController(broker_config, server_config, store_config)
    metrics = None
    if metrics_port >= 0:
        # One exporter for both daemons: their collectors share a registry (metric names differ).
        broker_metrics = BrokerMetrics(broker, -1, host)
        NamesrvMetrics(namesrv, -1, host, registry=broker_metrics.registry)
        metrics = MetricsHttpServer(broker_metrics.registry, host, metrics_port)
    await broker.start()
    if metrics is not None:
        await start_exporter(metrics, METRICS_HINT)
    print(f"The broker[broker-a, {broker.broker_addr}] boot success. serializeType=JSON and name server is "
          f"{namesrv.address}", flush=True)
    print(f"data dir: {home}")
    dashboard_stop = asyncio.Event()
    dashboard = None
    if dashboard_port >= 0:
        from rocketmq_py.tools.dashboard.startup import bind, serve  # the dashboard extra

        sock = bind(host, dashboard_port)  # here, so a port in use stops the start-up at once
        dashboard = asyncio.get_running_loop().create_task(serve(namesrv.address, host, dashboard_port,
                                                                 stop=dashboard_stop, sock=sock))
    try:
        await _demo(namesrv.address, broker.broker_addr)
        if not demo_only:
            print(f"Ready: point clients at NAMESRV_ADDR={namesrv.address}. Ctrl-C to stop.", flush=True)
            await stop.wait()
    finally:
        if dashboard is not None:
            dashboard_stop.set()
            await dashboard
        if metrics is not None:
            await metrics.close()
        await broker.shutdown()
        await namesrv.shutdown()


@app.command()
def main(
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(9876, min=0, max=65535, help="NameServer port (0 = any free port)"),
    broker_port: int = typer.Option(10911, min=0, max=65535, help="Broker port (0 = any free port)"),
    home: str = typer.Option(DEFAULT_HOME, "--home", help="embedded data dir"),
    demo_only: bool = typer.Option(False, "--demo-only", help="run the demo and exit"),
    metrics_port: int = typer.Option(-1, "--metrics-port", min=-1, max=65535,
                                     help="Prometheus metrics port (0 = any free, -1 = off)"),
    option: list[str] = typer.Option([], "-o", "--option",  # noqa: B008
                                     help="Override one broker or store config key: -o key=value"),
    log_level: str = typer.Option("WARNING", "--log-level", help="Logging level"),
    dashboard_port: int = typer.Option(-1, "--dashboard-port", min=-1, max=65535,
                                       help="mqdashboard web console port (0 = any free, -1 = off)"),
) -> None:
    missing = missing_dependencies() if dashboard_port >= 0 else []
    if missing:
        fail("mqstandalone", f"--dashboard-port needs the dashboard extra (missing {', '.join(missing)})",
             "pip install 'rocketmq-py[dashboard]'", 2)
    try:
        broker_setup = broker_configs(host, broker_port, home, option)
    except ConfigError as exc:
        fail("mqstandalone", exc, "check -o: it takes the broker and store keys `mqbroker -p` prints", 2)
    setup_logging("standalone", log_level, default_log_dir(home))
    raise_open_file_limit()
    with startup_failures("mqstandalone", PORT_HINT, {StoreLockedError: LOCKED_HINT}):
        run(_serve(host, port, broker_setup, home, demo_only, metrics_port, dashboard_port))


def cli() -> None:
    """The ``mqstandalone`` console script: usage errors as one line, like every other failure."""
    main_entry(app, "mqstandalone")


if __name__ == "__main__":
    cli()
