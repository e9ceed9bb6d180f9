"""RemotingClient's periodic scan, one timer shared by the clients of an event loop: async calls
still time out and idle connections still close on every client, whichever others close or fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rocketmq_py.remoting import ClientConfig, RemotingClient, RemotingCommand
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.exceptions import RemotingSendRequestError, RemotingTimeoutError
from tests.waiting import wait_until


@pytest.fixture
async def silent_addr() -> AsyncIterator[str]:
    """A server on a free port that reads everything and answers nothing."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()


async def _call_async(client: RemotingClient, addr: str, timeout: float) -> asyncio.Future[BaseException | None]:
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    await client.invoke_async(addr, RemotingCommand.request(RequestCode.HEART_BEAT), timeout,
                              lambda _resp, err: done.set_result(err))
    return done


async def test_async_calls_time_out_on_each_client_when_another_closes(silent_addr: str) -> None:
    clients = [RemotingClient(ClientConfig(scan_interval=0.05)) for _ in range(3)]
    try:
        calls = [await _call_async(c, silent_addr, 0.1) for c in clients]
        assert len({c._housekeeper for c in clients}) == 1, "one scan for the clients of a loop"
        await clients[0].close()  # its call fails at once; the others' scan must go on
        assert isinstance(await asyncio.wait_for(calls[0], 3), RemotingSendRequestError)
        for call in calls[1:]:
            assert isinstance(await asyncio.wait_for(call, 3), RemotingTimeoutError)
        for c in clients[1:]:
            assert (await c.get_connection(silent_addr)).pending_count == 0
    finally:
        for c in clients:
            await c.close()


async def test_a_failing_scan_does_not_stop_the_other_clients(silent_addr: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    broken, working = RemotingClient(ClientConfig(scan_interval=0.05)), RemotingClient(ClientConfig(scan_interval=0.05))
    try:
        await broken.get_connection(silent_addr)
        call = await _call_async(working, silent_addr, 0.1)

        def fail(now: float) -> None:
            raise RuntimeError("scan failed")

        monkeypatch.setattr(broken, "_scan", fail)
        assert isinstance(await asyncio.wait_for(call, 3), RemotingTimeoutError)
        assert isinstance(await asyncio.wait_for(await _call_async(working, silent_addr, 0.1), 3),
                          RemotingTimeoutError), "scans go on after a failure"
    finally:
        await broken.close()
        await working.close()


async def test_idle_connections_close_on_each_client(silent_addr: str) -> None:
    clients = [RemotingClient(ClientConfig(scan_interval=0.05, channel_max_idle=0.2)) for _ in range(2)]
    try:
        for c in clients:
            await c.get_connection(silent_addr)
        assert await wait_until(lambda: all(not c._connections for c in clients), timeout=5)
    finally:
        for c in clients:
            await c.close()


async def test_the_timer_stops_when_the_last_client_closes(silent_addr: str) -> None:
    clients = [RemotingClient(ClientConfig(scan_interval=0.05)) for _ in range(2)]
    for c in clients:
        await c.get_connection(silent_addr)
    keeper = clients[0]._housekeeper
    assert keeper is not None and keeper._timer is not None
    await clients[0].close()
    assert keeper._timer is not None, "still scanning for the other client"
    await clients[1].close()
    assert keeper._timer is None and not keeper._clients
    # A client started afterwards gets a scan of its own again.
    late = RemotingClient(ClientConfig(scan_interval=0.05))
    try:
        call = await _call_async(late, silent_addr, 0.1)
        assert isinstance(await asyncio.wait_for(call, 3), RemotingTimeoutError)
    finally:
        await late.close()
