"""Dispatch through a processor table: answered inline, awaited, or failed, all alike on the wire."""

from __future__ import annotations

import asyncio

from remoting.codes import ResponseCode
from remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from remoting.processor import REJECT_REMARK, ProcessorResult, ProcessorTable, RequestProcessor


class _Conn:
    """What dispatch needs of a connection: its writes are recorded."""

    remote_addr = "127.0.0.1:1"
    is_open = True

    def __init__(self) -> None:
        self.written: list[RemotingCommand] = []

    def write_command(self, cmd: RemotingCommand) -> None:
        self.written.append(cmd)


def _sync(conn: object, request: RemotingCommand) -> ProcessorResult:
    if request.ext_fields and "boom" in request.ext_fields:
        raise RuntimeError("exploded")
    return request.response(ResponseCode.SUCCESS, "inline")


async def _waits(conn: object, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)
    return request.response(ResponseCode.SUCCESS, "awaited")


async def test_a_plain_handler_is_answered_before_dispatch_returns_without_a_task() -> None:
    table = ProcessorTable()
    table.register(1, _sync)  # type: ignore[arg-type]
    conn = _Conn()
    request = RemotingCommand.request(1, {"a": "b"})
    table.dispatch(conn, request)  # type: ignore[arg-type]
    (answer,) = conn.written
    assert answer.remark == "inline" and answer.opaque == request.opaque and answer.flag & RPC_TYPE_RESPONSE
    assert table.in_flight == 0


async def test_a_coroutine_handler_is_answered_when_it_finishes() -> None:
    table = ProcessorTable()
    table.register(2, _waits)  # type: ignore[arg-type]
    conn = _Conn()
    request = RemotingCommand.request(2)
    table.dispatch(conn, request)  # type: ignore[arg-type]
    assert conn.written == [] and table.in_flight == 1
    await table.drain(5)
    (answer,) = conn.written
    assert answer.remark == "awaited" and answer.opaque == request.opaque


async def test_a_plain_handler_that_raises_answers_system_error_and_oneway_gets_nothing() -> None:
    table = ProcessorTable()
    table.register(1, _sync)  # type: ignore[arg-type]
    conn = _Conn()
    table.dispatch(conn, RemotingCommand.request(1, {"boom": "1"}))  # type: ignore[arg-type]
    (answer,) = conn.written
    assert answer.code == ResponseCode.SYSTEM_ERROR and "RuntimeError: exploded" in (answer.remark or "")
    table.dispatch(conn, RemotingCommand.request(1).mark_oneway())  # type: ignore[arg-type]
    assert len(conn.written) == 1


class _Rejecting(RequestProcessor):
    def __init__(self) -> None:
        self.rejecting = True

    def process_request(self, conn: object, request: RemotingCommand) -> ProcessorResult:  # type: ignore[override]
        return request.response(ResponseCode.SUCCESS, "served")

    def reject_request(self) -> bool:
        return self.rejecting


async def test_a_rejecting_processor_is_asked_and_a_wrapped_row_dispatches_to_its_wrapper() -> None:
    table = ProcessorTable()
    busy = _Rejecting()
    table.register(3, busy)
    table.register(1, _sync)  # type: ignore[arg-type]
    conn = _Conn()
    table.dispatch(conn, RemotingCommand.request(3))  # type: ignore[arg-type]
    busy.rejecting = False
    table.dispatch(conn, RemotingCommand.request(3))  # type: ignore[arg-type]
    assert [(c.code, c.remark) for c in conn.written] == [(ResponseCode.SYSTEM_BUSY, REJECT_REMARK),
                                                          (ResponseCode.SUCCESS, "served")]

    class _Tagging(RequestProcessor):
        def __init__(self, inner: RequestProcessor) -> None:
            self.inner = inner

        def process_request(self, conn: object, request: RemotingCommand) -> ProcessorResult:  # type: ignore[override]
            response = self.inner.process_request(conn, request)  # type: ignore[arg-type]
            assert isinstance(response, RemotingCommand)
            response.remark = f"wrapped {response.remark}"
            return response

    table.wrap_processors(lambda code, p: _Tagging(p))
    table.dispatch(conn, RemotingCommand.request(1))  # type: ignore[arg-type]
    assert conn.written[-1].remark == "wrapped inline"
