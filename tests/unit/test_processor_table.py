"""Dispatch through a processor table: answered inline, awaited, or failed, all alike on the wire."""

from __future__ import annotations

import asyncio

import pytest

from rocketmq_py.remoting.codes import ResponseCode, SerializeType
from rocketmq_py.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.exceptions import RemotingCommandException
from rocketmq_py.remoting.frame import encode_frame
from rocketmq_py.remoting.processor import REJECT_REMARK, ProcessorResult, ProcessorTable, RequestProcessor
from rocketmq_py.remoting.protocol.heartbeat import HeartbeatData
from tests.unit.recording_connection import RecordingConnection


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
    conn = RecordingConnection()
    request = RemotingCommand.request(1, {"a": "b"})
    table.dispatch(conn, request)  # type: ignore[arg-type]
    (answer,) = conn.written
    assert answer.remark == "inline" and answer.opaque == request.opaque and answer.flag & RPC_TYPE_RESPONSE
    assert table.in_flight == 0


async def test_a_coroutine_handler_is_answered_when_it_finishes() -> None:
    table = ProcessorTable()
    table.register(2, _waits)  # type: ignore[arg-type]
    conn = RecordingConnection()
    request = RemotingCommand.request(2)
    table.dispatch(conn, request)  # type: ignore[arg-type]
    assert conn.written == [] and table.in_flight == 1
    await table.drain(5)
    (answer,) = conn.written
    assert answer.remark == "awaited" and answer.opaque == request.opaque


async def test_a_future_handler_is_answered_by_its_callback_and_counted_in_flight_until_then() -> None:
    """A synced send's answer is a plain future: answered when it resolves, without a task; one
    that fails answers SYSTEM_ERROR; one cancelled by shutdown's drain answers nothing."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[RemotingCommand]] = []

    def later(conn: object, request: RemotingCommand) -> ProcessorResult:
        futures.append(loop.create_future())
        return futures[-1]

    table = ProcessorTable()
    table.register(3, later)  # type: ignore[arg-type]
    conn = RecordingConnection()
    requests = [RemotingCommand.request(3) for _ in range(3)]
    for request in requests:
        table.dispatch(conn, request)  # type: ignore[arg-type]
    tasks_before = len(asyncio.all_tasks())
    assert conn.written == [] and table.in_flight == 3
    futures[1].set_result(requests[1].response(ResponseCode.SUCCESS, "stored"))
    futures[0].set_exception(OSError("disk gone"))
    assert len(asyncio.all_tasks()) == tasks_before  # nothing runs as a task
    await asyncio.sleep(0)  # the futures' callbacks run in the next turn
    assert [(a.opaque, a.code) for a in conn.written] == [(requests[1].opaque, ResponseCode.SUCCESS),
                                                          (requests[0].opaque, ResponseCode.SYSTEM_ERROR)]
    assert "OSError: disk gone" in (conn.written[1].remark or "") and table.in_flight == 1
    await table.drain(0.01)  # the last never resolves: cancelled, answered with nothing
    assert futures[2].cancelled() and table.in_flight == 0 and len(conn.written) == 2


async def test_a_plain_handler_that_raises_answers_system_error_and_oneway_gets_nothing() -> None:
    table = ProcessorTable()
    table.register(1, _sync)  # type: ignore[arg-type]
    conn = RecordingConnection()
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


async def test_a_rejecting_processor_is_asked_before_every_request() -> None:
    table = ProcessorTable()
    busy = _Rejecting()
    table.register(3, busy)
    conn = RecordingConnection()
    table.dispatch(conn, RemotingCommand.request(3))  # type: ignore[arg-type]
    busy.rejecting = False
    table.dispatch(conn, RemotingCommand.request(3))  # type: ignore[arg-type]
    assert [(c.code, c.remark) for c in conn.written] == [(ResponseCode.SYSTEM_BUSY, REJECT_REMARK),
                                                          (ResponseCode.SUCCESS, "served")]


class _Runs(RequestProcessor):
    """Takes the leading requests of a run without a "single" field, in one call each run."""

    def __init__(self) -> None:
        self.runs: list[list[int]] = []
        self.singles: list[int] = []
        self.explode = False

    def process_request(self, conn: object, request: RemotingCommand) -> ProcessorResult:  # type: ignore[override]
        self.singles.append(request.opaque)
        return request.response(ResponseCode.SUCCESS, "single")

    def process_requests(self, conn: object, requests: list[RemotingCommand]) -> list[ProcessorResult]:
        if self.explode:
            raise RuntimeError("run exploded")
        taken = []
        for request in requests:
            if request.ext_fields and "single" in request.ext_fields:
                break
            taken.append(request)
        self.runs.append([r.opaque for r in taken])
        return [r.response(ResponseCode.SUCCESS, "run") for r in taken]


async def test_runs_of_one_code_go_to_process_requests_and_the_rest_singly_in_order() -> None:
    table = ProcessorTable()
    runs = _Runs()
    table.register(5, runs)
    table.register(1, _sync)  # type: ignore[arg-type]
    conn = RecordingConnection()
    requests = [RemotingCommand.request(5), RemotingCommand.request(5),  # a run of two
                RemotingCommand.request(5, {"single": "1"}),              # left alone: dispatched singly
                RemotingCommand.request(5), RemotingCommand.request(5),  # the rest of that run, offered again
                RemotingCommand.request(1),                               # another code ends the run
                RemotingCommand.request(5),                               # a run of one: plain dispatch
                RemotingCommand.request(1),
                RemotingCommand.request(5).mark_oneway(), RemotingCommand.request(5)]
    table.dispatch_all(conn, requests)  # type: ignore[arg-type]
    op = [r.opaque for r in requests]
    assert runs.runs == [[op[0], op[1]], [], [op[3], op[4]], [op[8], op[9]]]
    assert runs.singles == [op[2], op[6]]
    # Every two-way request answered once, in arrival order; the oneway one not at all.
    assert [c.opaque for c in conn.written] == op[:8] + op[9:]
    assert [c.remark for c in conn.written] == ["run", "run", "single", "run", "run", "inline", "single", "inline",
                                                "run"]


class _Hook:
    """An RPC hook that records what it is told and refuses requests with a "deny" field."""

    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[tuple[int, int | None]] = []

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> RemotingCommand | None:
        assert remote_addr == "127.0.0.1:1"
        self.before.append(request.opaque)
        if request.ext_fields and "deny" in request.ext_fields:
            return request.response(ResponseCode.NO_PERMISSION, "denied")
        return None

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        self.after.append((request.opaque, None if response is None else response.code))


async def test_rpc_hooks_run_once_per_request_before_any_processor_and_keep_the_runs() -> None:
    table = ProcessorTable()
    runs = _Runs()
    table.register(5, runs)
    table.register(1, _sync)  # type: ignore[arg-type]
    hook = _Hook()
    table.register_rpc_hook(hook)
    conn = RecordingConnection()
    requests = [RemotingCommand.request(5), RemotingCommand.request(5, {"deny": "1"}), RemotingCommand.request(5),
                RemotingCommand.request(1, {"deny": "1"}), RemotingCommand.request(99),
                RemotingCommand.request(5).mark_oneway(), RemotingCommand.request(5, {"deny": "1"}).mark_oneway()]
    table.dispatch_all(conn, requests)  # type: ignore[arg-type]
    op = [r.opaque for r in requests]
    assert hook.before == [op[0], op[1], op[2], op[3], op[5], op[6]]  # 99 has no processor: not hooked
    # the allowed ones still make runs: 0 and 2 (1 refused between them); 5 alone after code 99
    assert runs.runs == [[op[0], op[2]]] and runs.singles == [op[5]]
    answers = {c.opaque: (c.code, c.remark) for c in conn.written}
    assert answers[op[1]] == (ResponseCode.NO_PERMISSION, "denied") == answers[op[3]]
    assert answers[op[4]][0] == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert op[6] not in answers and op[5] not in answers  # oneway: refused or served, never answered
    # Told of each answer the processors gave (a oneway request's too, never written); a refusing
    # hook is not told of its own refusal, as no hook ran before it.
    assert sorted(hook.after) == sorted([(op[0], ResponseCode.SUCCESS), (op[2], ResponseCode.SUCCESS),
                                         (op[5], ResponseCode.SUCCESS)])
    single = RemotingCommand.request(1, {"deny": "1"})
    table.dispatch(conn, single)  # type: ignore[arg-type]
    assert conn.written[-1].code == ResponseCode.NO_PERMISSION and hook.before[-1] == single.opaque


async def test_rpc_hooks_are_told_every_answer_awaited_failed_busy_or_refused_by_a_later_hook() -> None:
    table = ProcessorTable()
    table.register(1, _sync)  # type: ignore[arg-type]
    table.register(2, _waits)  # type: ignore[arg-type]
    busy = _Rejecting()
    table.register(3, busy)
    first, second = _Hook(), _Hook()
    table.register_rpc_hook(first)

    class _Denies(_Hook):
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> RemotingCommand | None:
            self.before.append(request.opaque)
            return request.response(ResponseCode.NO_PERMISSION, "second says no") if request.code == 1 else None

    table.register_rpc_hook(second := _Denies())
    conn = RecordingConnection()
    refused, awaited, failed, rejected = (RemotingCommand.request(1), RemotingCommand.request(2),
                                          RemotingCommand.request(2, {"x": "1"}), RemotingCommand.request(3))
    table.dispatch(conn, refused)  # type: ignore[arg-type]
    table.dispatch(conn, awaited)  # type: ignore[arg-type]
    table.dispatch(conn, rejected)  # type: ignore[arg-type]
    await table.drain(5)
    # The first hook ran before the second refused: it is told the refusal; the second is not.
    assert first.after[0] == (refused.opaque, ResponseCode.NO_PERMISSION)
    assert (refused.opaque, ResponseCode.NO_PERMISSION) not in second.after
    for hook in (first, second):
        assert (awaited.opaque, ResponseCode.SUCCESS) in hook.after
        assert (rejected.opaque, ResponseCode.SYSTEM_BUSY) in hook.after
    table.register(4, lambda conn, request: (_ for _ in ()).throw(RuntimeError("exploded")))  # type: ignore[arg-type]
    failed = RemotingCommand.request(4)
    table.dispatch(conn, failed)  # type: ignore[arg-type]
    assert first.after[-1] == (failed.opaque, ResponseCode.SYSTEM_ERROR) == second.after[-1]
    assert [c.opaque for c in conn.written] == [refused.opaque, rejected.opaque, awaited.opaque, failed.opaque]


async def test_a_failing_hook_neither_stops_the_answer_nor_the_other_hooks() -> None:
    table = ProcessorTable()
    table.register(1, _sync)  # type: ignore[arg-type]

    class _Breaks(_Hook):
        def do_after_response(self, remote_addr: str, request: RemotingCommand,
                              response: RemotingCommand | None) -> None:
            raise RuntimeError("hook bug")

    later = _Hook()
    table.register_rpc_hook(_Breaks())
    table.register_rpc_hook(later)
    conn = RecordingConnection()
    request = RemotingCommand.request(1)
    table.dispatch(conn, request)  # type: ignore[arg-type]
    assert [c.remark for c in conn.written] == ["inline"] and later.after == [(request.opaque, ResponseCode.SUCCESS)]

    class _RaisesBefore(_Hook):
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> RemotingCommand | None:
            raise RuntimeError("before bug")

    table.rpc_hooks[:] = [later, _RaisesBefore()]
    request = RemotingCommand.request(1)
    table.dispatch(conn, request)  # type: ignore[arg-type]
    assert conn.written[-1].code == ResponseCode.SYSTEM_ERROR and "before bug" in (conn.written[-1].remark or "")
    assert later.after[-1] == (request.opaque, ResponseCode.SYSTEM_ERROR)


async def test_a_run_whose_processor_raises_is_answered_system_error_whole() -> None:
    table = ProcessorTable()
    runs = _Runs()
    runs.explode = True
    table.register(5, runs)
    conn = RecordingConnection()
    requests = [RemotingCommand.request(5) for _ in range(3)]
    table.dispatch_all(conn, requests)  # type: ignore[arg-type]
    assert [(c.opaque, c.code) for c in conn.written] == [(r.opaque, ResponseCode.SYSTEM_ERROR) for r in requests]
    assert "run exploded" in (conn.written[0].remark or "")


async def test_a_read_mixing_requests_and_responses_is_handled_in_arrival_order() -> None:
    """Runs end where a response comes: a request after it sees that response already taken."""
    table = ProcessorTable()
    seen: list[tuple[int, bool]] = []
    call: asyncio.Future[RemotingCommand] | None = None

    class _Recording(RequestProcessor):
        def process_request(self, conn: object, request: RemotingCommand) -> ProcessorResult:  # type: ignore[override]
            return self.process_requests(conn, [request])[0]

        def process_requests(self, conn: object, requests: list[RemotingCommand]) -> list[ProcessorResult]:
            assert call is not None
            seen.extend((r.opaque, call.done()) for r in requests)
            return [r.response(ResponseCode.SUCCESS) for r in requests]

    table.register(5, _Recording())
    conn = RemotingConnection(table)

    class _Transport:
        def write(self, data: bytes) -> None: ...
        def get_extra_info(self, name: str) -> tuple[str, int]: return ("127.0.0.1", 1)
        def is_closing(self) -> bool: return False

    conn.connection_made(_Transport())  # type: ignore[arg-type]
    outgoing = RemotingCommand.request(9)
    call = conn.invoke(outgoing, 5)
    before = [RemotingCommand.request(5, serialize_type=SerializeType.MSGPACK) for _ in range(2)]
    after = [RemotingCommand.request(5, serialize_type=SerializeType.MSGPACK) for _ in range(2)]
    response = outgoing.response(ResponseCode.SUCCESS)
    response.serialize_type = SerializeType.MSGPACK
    conn.data_received(b"".join(encode_frame(c) for c in (*before, response, *after)))
    assert seen == [(r.opaque, False) for r in before] + [(r.opaque, True) for r in after]
    assert (await call).code == ResponseCode.SUCCESS


async def test_a_handler_refuses_with_its_code_and_remark_by_raising_and_an_unreadable_body_alike(
        caplog: pytest.LogCaptureFixture) -> None:
    def refuses(conn: object, request: RemotingCommand) -> ProcessorResult:
        raise RemotingCommandException("not for you", ResponseCode.NO_PERMISSION)

    async def reads_a_heartbeat(conn: object, request: RemotingCommand) -> RemotingCommand:
        data = HeartbeatData.decode_request(request.body, "heartbeat body")
        return request.response(remark=data.clientID)

    table = ProcessorTable()
    table.register(1, refuses)  # type: ignore[arg-type]
    table.register(2, reads_a_heartbeat)  # type: ignore[arg-type]
    conn = RecordingConnection()
    table.dispatch(conn, RemotingCommand.request(1))  # type: ignore[arg-type]
    for body in (None, b"{", b'{"clientID": 5, "consumerDataSet": [{"consumeType": 9}]}', b'{"clientID": "c1"}'):
        table.dispatch(conn, RemotingCommand.request(2, body=body))  # type: ignore[arg-type]
    await table.drain(5)
    assert (conn.written[0].code, conn.written[0].remark) == (ResponseCode.NO_PERMISSION, "not for you")
    bad = conn.written[1:4]
    assert all(c.code == ResponseCode.SYSTEM_ERROR and (c.remark or "").startswith("bad heartbeat body: ")
               for c in bad), [(c.code, c.remark) for c in bad]
    assert (conn.written[4].code, conn.written[4].remark) == (ResponseCode.SUCCESS, "c1")
    assert not [r for r in caplog.records if r.exc_info], "a refusal is the request's fault: no traceback"
