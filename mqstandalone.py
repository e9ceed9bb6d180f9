"""``mqstandalone``: the README's run command — RocketMQ in one process on an embedded data dir.

Until the NameServer and Broker daemons land, it starts what exists: a remoting server on the
NameServer port, proves a round trip through the real client over loopback, and keeps serving
until interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import typer

from remoting import RemotingClient, RemotingCommand, RemotingServer, ServerConfig
from remoting.codes import RequestCode
from remoting.loop import run

app = typer.Typer(add_completion=False, help=__doc__)


async def _serve(host: str, port: int, demo_only: bool) -> None:
    server = RemotingServer(ServerConfig(host=host, port=port))

    async def heartbeat(conn, request):  # type: ignore[no-untyped-def]
        return request.response()

    server.register_processor(RequestCode.HEART_BEAT, heartbeat)
    await server.start()
    addr = f"{host}:{server.port}"
    print(f"remoting server listening on {addr}")
    client = RemotingClient()
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT), 3.0)
    print(f"demo: HEART_BEAT round trip -> code {response.code} (SUCCESS)")
    unknown = await client.invoke(addr, RemotingCommand.request(9999), 3.0)
    print(f"demo: unknown code -> code {unknown.code} remark {unknown.remark!r}")
    await client.close()
    if not demo_only:
        print("NameServer and Broker are not built yet; Ctrl-C to stop.")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    await server.close()


@app.command()
def main(
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(9876, help="port to listen on (0 = any free port)"),
    demo_only: bool = typer.Option(False, "--demo-only", help="run the demo and exit"),
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    run(_serve(host, port, demo_only))


if __name__ == "__main__":
    app()
