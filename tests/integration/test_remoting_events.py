"""Channel events a daemon's housekeeping relies on: connect, idle close, close."""

from __future__ import annotations

import asyncio

import pytest

from rocketmq_py.remoting import (
    ConnectionEvents,
    RemotingClient,
    RemotingCommand,
    RemotingConnection,
    RemotingSendRequestError,
    RemotingServer,
    ServerConfig,
)


class Recorder(ConnectionEvents):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.closed = asyncio.Event()

    def on_connect(self, conn: RemotingConnection) -> None:
        self.events.append(("connect", conn.remote_addr))

    def on_idle(self, conn: RemotingConnection) -> None:
        self.events.append(("idle", conn.remote_addr))

    def on_close(self, conn: RemotingConnection) -> None:
        self.events.append(("close", conn.remote_addr))
        self.closed.set()


async def test_idle_connection_is_closed_with_events_in_order() -> None:
    recorder = Recorder()
    server = RemotingServer(ServerConfig(host="127.0.0.1", channel_max_idle=0.3, scan_interval=0.1), recorder)

    async def ok(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return req.response()

    server.register_processor(1, ok)
    await server.start()
    client = RemotingClient()
    try:
        addr = f"127.0.0.1:{server.port}"
        assert (await client.invoke(addr, RemotingCommand.request(1), 3)).code == 0
        local = (await client.get_connection(addr)).local_addr
        await asyncio.wait_for(recorder.closed.wait(), 5)
        assert recorder.events == [("connect", local), ("idle", local), ("close", local)]
        assert not server.connections
        # The client notices the close and reconnects on next use.
        assert (await client.invoke(addr, RemotingCommand.request(1), 3)).code == 0
    finally:
        await client.close()
        await server.close()


async def test_server_close_fails_nothing_silently() -> None:
    server = RemotingServer(ServerConfig(host="127.0.0.1"))
    hold, started = asyncio.Event(), asyncio.Event()

    async def never(conn: RemotingConnection, req: RemotingCommand) -> None:
        started.set()
        await hold.wait()

    server.register_processor(2, never)
    server.config.shutdown_grace = 0.2
    await server.start()
    client = RemotingClient()
    try:
        call = asyncio.ensure_future(client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(2), 10))
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.wait_for(server.close(), 5)
        with pytest.raises(RemotingSendRequestError, match="connection closed"):
            await asyncio.wait_for(call, 5)
    finally:
        await client.close()
