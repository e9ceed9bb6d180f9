"""The remoting layer against a real server process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from rocketmq_py.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingSendRequestError,
    RemotingTimeoutError,
    ResponseCode,
    SerializeType,
)
from tests.integration.remoting_server import (
    ASK_CLIENT,
    CLIENT_QUESTION,
    CLOSE_ME,
    COUNT_ONEWAY,
    ECHO,
    FAIL,
    GET_COUNT,
    SLEEP,
    SLOW_LIMITED,
)

SERVER = os.path.join(os.path.dirname(__file__), "remoting_server.py")


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the server prints it at once or dies (then "" ends the read)
    if not line.startswith("LISTENING "):
        stop_server(proc)
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, f"127.0.0.1:{int(line.split()[1])}"


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(10)
    if proc.stdout:
        proc.stdout.close()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, addr = start_server()
    yield proc, addr
    stop_server(proc)


@pytest.fixture
def addr(server: tuple[subprocess.Popen[str], str]) -> str:
    assert server[0].poll() is None, "server process died"
    return server[1]


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK])
async def test_sync_call_round_trip_in_each_serialization(client: RemotingClient, addr: str, stype: int) -> None:
    req = RemotingCommand.request(ECHO, {"topic": "T", "k": "v"}, b"payload", serialize_type=stype)
    resp = await client.invoke(addr, req, 3)
    assert resp.code == ResponseCode.SUCCESS and resp.is_response
    assert resp.opaque == req.opaque
    assert resp.serialize_type == stype, "server must answer in the request's serialization"
    assert resp.body == b"payload" and resp.ext_fields == {"topic": "T", "k": "v"}


async def test_async_call_runs_callback(client: RemotingClient, addr: str) -> None:
    done: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

    def callback(resp: RemotingCommand | None, err: BaseException | None) -> None:
        done.set_exception(err) if err else done.set_result(resp)  # type: ignore[arg-type]

    await client.invoke_async(addr, RemotingCommand.request(ECHO, None, b"async"), 3, callback)
    resp = await asyncio.wait_for(done, 5)
    assert resp.body == b"async"


async def test_oneway_requests_arrive_and_get_no_answer(client: RemotingClient, addr: str) -> None:
    before = int((await client.invoke(addr, RemotingCommand.request(GET_COUNT), 3)).ext_fields["count"])
    for _ in range(50):
        await client.invoke_oneway(addr, RemotingCommand.request(COUNT_ONEWAY))
    conn = await client.get_connection(addr)
    assert conn.pending_count == 0, "a oneway request must not wait for an answer"
    deadline = time.monotonic() + 5
    count = before
    while time.monotonic() < deadline and count < before + 50:
        count = int((await client.invoke(addr, RemotingCommand.request(GET_COUNT), 3)).ext_fields["count"])
    assert count == before + 50


async def test_sync_timeout(client: RemotingClient, addr: str) -> None:
    start = time.monotonic()
    with pytest.raises(RemotingTimeoutError, match="timeout"):
        await client.invoke(addr, RemotingCommand.request(SLEEP, {"ms": "2000"}), 0.3)
    assert 0.25 <= time.monotonic() - start < 1.5
    # The connection stays usable and the late answer is dropped, not misdelivered.
    resp = await client.invoke(addr, RemotingCommand.request(ECHO, None, b"after"), 3)
    assert resp.body == b"after"


async def test_async_timeout_found_by_scan(addr: str) -> None:
    from rocketmq_py.remoting import ClientConfig

    c = RemotingClient(ClientConfig(scan_interval=0.1))
    try:
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        await c.invoke_async(addr, RemotingCommand.request(SLEEP, {"ms": "3000"}), 0.2,
                             lambda resp, err: done.set_result(err))
        err = await asyncio.wait_for(done, 3)
        assert isinstance(err, RemotingTimeoutError)
        conn = await c.get_connection(addr)
        assert conn.pending_count == 0
    finally:
        await c.close()


async def test_1000_concurrent_requests_on_one_connection(client: RemotingClient, addr: str) -> None:
    async def one(i: int) -> None:
        body = f"request-{i}".encode() * (1 + i % 7)
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"i": str(i)}, body), 10)
        assert resp.body == body and resp.ext_fields == {"i": str(i)}

    await asyncio.gather(*(one(i) for i in range(1000)))
    assert len(client._connections) == 1, "all requests must share one connection"


async def test_server_to_client_request(addr: str) -> None:
    c = RemotingClient()
    seen: list[RemotingCommand] = []

    async def answer(conn, req):  # type: ignore[no-untyped-def]
        seen.append(req)
        return req.response(body=b"client-" + req.ext_fields["q"].encode())

    c.register_processor(CLIENT_QUESTION, answer)
    try:
        resp = await c.invoke(addr, RemotingCommand.request(ASK_CLIENT), 5)
        assert resp.code == ResponseCode.SUCCESS and resp.body == b"client-who"
        assert len(seen) == 1 and seen[0].code == CLIENT_QUESTION
    finally:
        await c.close()


async def test_client_without_processor_answers_not_supported(client: RemotingClient, addr: str) -> None:
    resp = await client.invoke(addr, RemotingCommand.request(ASK_CLIENT), 5)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_unknown_code(client: RemotingClient, addr: str) -> None:
    resp = await client.invoke(addr, RemotingCommand.request(4242), 3)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4242 not supported"


async def test_processor_exception_is_system_error_and_connection_survives(client: RemotingClient,
                                                                           addr: str) -> None:
    conn = await client.get_connection(addr)
    resp = await client.invoke(addr, RemotingCommand.request(FAIL), 3)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "RuntimeError: deliberate failure"
    assert (await client.invoke(addr, RemotingCommand.request(ECHO, None, b"x"), 3)).body == b"x"
    assert await client.get_connection(addr) is conn


async def test_system_busy_when_processor_overloaded(client: RemotingClient, addr: str) -> None:
    reqs = [client.invoke(addr, RemotingCommand.request(SLOW_LIMITED, {"ms": "300"}), 5) for _ in range(8)]
    codes = [r.code for r in await asyncio.gather(*reqs)]
    assert codes.count(ResponseCode.SUCCESS) == 2
    assert codes.count(ResponseCode.SYSTEM_BUSY) == 6
    busy = await client.invoke(addr, RemotingCommand.request(SLOW_LIMITED, {"ms": "0"}), 5)
    assert busy.code == ResponseCode.SUCCESS, "the limit frees up once handlers finish"


async def test_reconnect_after_drop_and_pending_calls_fail(client: RemotingClient, addr: str) -> None:
    first = await client.get_connection(addr)
    pending = client.invoke(addr, RemotingCommand.request(SLEEP, {"ms": "2000"}), 5)
    await client.invoke_oneway(addr, RemotingCommand.request(CLOSE_ME))
    with pytest.raises(RemotingSendRequestError):
        await pending
    resp = await client.invoke(addr, RemotingCommand.request(ECHO, None, b"again"), 3)
    assert resp.body == b"again"
    assert await client.get_connection(addr) is not first


async def test_rpc_hooks_see_request_and_response(addr: str) -> None:
    calls: list[tuple[str, int, int | None]] = []

    class Hook:
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            request.ext_fields = {**(request.ext_fields or {}), "AccessKey": "ak"}
            calls.append(("before", request.code, None))

        def do_after_response(self, remote_addr: str, request: RemotingCommand,
                              response: RemotingCommand | None) -> None:
            calls.append(("after", request.code, None if response is None else response.code))

    c = RemotingClient(rpc_hooks=[Hook()])
    try:
        resp = await c.invoke(addr, RemotingCommand.request(ECHO), 3)
        assert resp.ext_fields == {"AccessKey": "ak"}, "a hook's change must reach the wire"
        assert calls == [("before", ECHO, None), ("after", ECHO, 0)]
    finally:
        await c.close()


async def test_response_table_is_bounded(addr: str) -> None:
    from rocketmq_py.remoting import ClientConfig, RemotingTooMuchRequestError

    c = RemotingClient(ClientConfig(max_pending=10))
    try:
        await c.get_connection(addr)
        waiting = [c.invoke(addr, RemotingCommand.request(SLEEP, {"ms": "200"}), 5) for _ in range(10)]
        with pytest.raises(RemotingTooMuchRequestError):
            await c.invoke(addr, RemotingCommand.request(ECHO), 5)
        assert all(r.code == ResponseCode.SUCCESS for r in await asyncio.gather(*waiting))
        conn = await c.get_connection(addr)
        assert conn.pending_count == 0
        assert (await c.invoke(addr, RemotingCommand.request(ECHO, None, b"ok"), 5)).body == b"ok"
    finally:
        await c.close()
