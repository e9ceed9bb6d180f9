"""``mqstandalone``: the README's run command -- RocketMQ in one process on an embedded data dir.

Starts a NameServer in this process (the Broker joins it once it lands), then proves the
wire path with a real client: it registers a demo broker entry over the wire and reads its route
back. It keeps serving on the printed address until interrupted, so official clients and tools
can be pointed at it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import typer

from namesrv.config import NamesrvConfig
from namesrv.controller import NamesrvController
from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting.loop import run
from remoting.protocol.json_body import loads
from remoting.protocol.namesrv import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from remoting.protocol.route import RegisterBrokerBody
from remoting.protocol.topic import TopicConfig, TopicConfigSerializeWrapper
from remoting.server_config import NettyServerConfig

app = typer.Typer(add_completion=False, help=__doc__)

DEFAULT_HOME = os.path.join(os.path.expanduser("~"), ".rocketmq-py", "standalone")


async def _demo(addr: str) -> None:
    client = RemotingClient()
    try:
        demo = {"brokerName": "demo-broker", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster",
                "brokerId": 0}
        body = RegisterBrokerBody(topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
            topicConfigTable={"DemoTopic": TopicConfig(topicName="DemoTopic", readQueueNums=4, writeQueueNums=4)}))
        header = RegisterBrokerRequestHeader(haServerAddr="127.0.0.1:10912", **demo)  # type: ignore[arg-type]
        reg = await client.invoke(addr, RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body.encode()), 3)
        print(f"demo: REGISTER_BROKER demo-broker -> code {reg.code}")
        route = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": "DemoTopic"}), 3)
        assert route.code == ResponseCode.SUCCESS and route.body
        print(f"demo: GET_ROUTEINFO_BY_TOPIC DemoTopic -> {loads(route.body)}")
        await client.invoke(addr, RemotingCommand.request(
            RequestCode.UNREGISTER_BROKER, UnRegisterBrokerRequestHeader(**demo)), 3)  # type: ignore[arg-type]
        print("demo: demo-broker unregistered again")
    finally:
        await client.close()


async def _serve(host: str, port: int, home: str, demo_only: bool) -> None:
    namesrv = NamesrvController(
        NamesrvConfig(rocketmqHome=home, kvConfigPath=os.path.join(home, "namesrv", "kvConfig.json"),
                      configStorePath=os.path.join(home, "namesrv", "namesrv.properties")),
        NettyServerConfig(listenPort=port, bindAddress=host))
    await namesrv.start()
    print(f"The Name Server boot success. serializeType=JSON, address {namesrv.address}", flush=True)
    print(f"data dir: {home}")
    await _demo(namesrv.address)
    if not demo_only:
        print(f"Point clients at NAMESRV_ADDR={namesrv.address}. The Broker is not built yet; Ctrl-C to stop.",
              flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    await namesrv.shutdown()


@app.command()
def main(
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(9876, help="NameServer port (0 = any free port)"),
    home: str = typer.Option(DEFAULT_HOME, "--home", help="embedded data dir"),
    demo_only: bool = typer.Option(False, "--demo-only", help="run the demo and exit"),
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s - %(message)s")
    run(_serve(host, port, home, demo_only))


if __name__ == "__main__":
    app()
