"""DashboardStartup: the ``mqdashboard`` command, and ``serve`` for ``mqstandalone --dashboard-port``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import typer
import uvicorn

from rocketmq_py.common.daemon import wait_for_stop_signal
from rocketmq_py.tools.cli import NamesrvOption, main_entry
from rocketmq_py.tools.dashboard.app import create_app

# RocketMQ Dashboard's server.port.
DEFAULT_PORT = 8080

app = typer.Typer(name="mqdashboard", add_completion=False)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that port 0 can be reported in the boot line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


class DashboardServer(uvicorn.Server):
    """uvicorn's server without its own signal capture: it re-raises SIGTERM after a graceful
    stop, so the process would die by the signal; here the caller stops it and exits 0, as every
    daemon of the project does."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(namesrv_addr: str | None, log_level: str = "warning") -> DashboardServer:
    """A uvicorn server for the console; the caller hands it its socket."""
    return DashboardServer(uvicorn.Config(create_app(namesrv_addr), log_level=log_level, access_log=False,
                                          lifespan="on"))


async def serve(namesrv_addr: str | None, host: str, port: int, stop: asyncio.Event | None = None,
                sock: socket.socket | None = None) -> None:
    """Run the console until ``stop`` is set (by default: SIGINT or SIGTERM), then close it
    gracefully: open requests finish, the Admin and producers shut down. ``sock``: already bound
    by the caller (mqstandalone, which reports a port in use before anything else starts)."""
    sock = sock if sock is not None else bind(host, port)
    addr = sock.getsockname()
    srv = server(namesrv_addr)
    stop = stop if stop is not None else wait_for_stop_signal()
    task = asyncio.get_running_loop().create_task(srv.serve(sockets=[sock]))
    stopping = asyncio.get_running_loop().create_task(stop.wait())
    try:
        while not srv.started and not task.done():
            await asyncio.wait({task}, timeout=0.05)  # uvicorn offers no start event to await
        if srv.started:
            print(f"mqdashboard boot success, listening on address {addr[0]}:{addr[1]}", flush=True)
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        srv.should_exit = True
        stopping.cancel()
        await task
        sock.close()


@app.command()
def main(
    namesrv: str | None = NamesrvOption,
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=0, max=65535, help="port (0 = any free port)"),
) -> None:
    """RocketMQ's web console: clusters, topics, consumer groups, messages and traces."""
    if not namesrv:
        raise typer.BadParameter("no NameServer address: pass -n host:port or set NAMESRV_ADDR")
    asyncio.run(serve(namesrv, host, port))


def cli() -> None:
    main_entry(app, "mqdashboard")
