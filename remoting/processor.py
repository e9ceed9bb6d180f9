"""Processor tables: request code -> processor, as ``BrokerController.registerProcessor`` does.

A server (or a client, for the requests a broker sends it) is a table. Adding a feature is adding
a processor and a row. Instead of Java's executor per processor, each row has a concurrency
limit: a request arriving while the limit is reached is answered SYSTEM_BUSY at once (Java's
"[OVERLOAD]" answer when a processor's pool is full), so overload is visible to clients rather
than queued without bound.

Code around every request -- the ACL check, the metrics' rpc latency -- is a list of RPC hooks
(Java's ``RPCHook``, remoting/rpc_hook.py) the table calls, never a wrapper over a processor:
a table without hooks checks the empty list and calls nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from rocketmq_py.common.refusal_log import RefusalLog
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RPC_ONEWAY, RPC_TYPE_RESPONSE, RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingCommandException

if TYPE_CHECKING:
    from rocketmq_py.remoting.connection import RemotingConnection
    from rocketmq_py.remoting.rpc_hook import RPCHook

log = logging.getLogger("rocketmq.remoting")

DEFAULT_MAX_CONCURRENCY = 1024

OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"
REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"


# What a processor gives back: the response, None (answer later, as long polling does, or never,
# for oneway), or an awaitable of either. A handler that never waits answers directly: no
# coroutine is made for it (a send under ASYNC_FLUSH cost 6% less in the broker).
ProcessorResult = RemotingCommand | None | Awaitable[RemotingCommand | None]


class RequestProcessor:
    """One request family.

    A processor may also define ``process_requests(conn, requests)``: given requests of one code
    that arrived together, in order, it handles a leading part of them at once and returns their
    results in order (an empty list: none). The table dispatches the first request it left
    alone singly and offers it the rest. It must not raise for a bad request, only leave it out;
    pipelined sends are where sharing one store write among several pays.
    """

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> ProcessorResult:
        raise NotImplementedError

    def reject_request(self) -> bool:
        """True while the processor wants new requests turned away (e.g. page cache busy)."""
        return False


ProcessorFunc = Callable[["RemotingConnection", RemotingCommand], ProcessorResult]
ManyFunc = Callable[["RemotingConnection", list[RemotingCommand]], list[ProcessorResult]]


class _FunctionProcessor(RequestProcessor):
    __slots__ = ("_func",)

    def __init__(self, func: ProcessorFunc) -> None:
        self._func = func

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> ProcessorResult:
        return self._func(conn, request)


class _Row:
    __slots__ = ("_processor", "call", "call_many", "in_flight", "limit", "rejects")

    def __init__(self, processor: RequestProcessor, limit: int) -> None:
        self.processor = processor
        self.limit = limit
        self.in_flight = 0

    @property
    def processor(self) -> RequestProcessor:
        return self._processor

    @processor.setter
    def processor(self, processor: RequestProcessor) -> None:
        # What dispatch calls, resolved once: a plain function without its wrapper, and no
        # rejection check for a processor that never rejects (each is a call per request).
        self._processor = processor
        self.call: ProcessorFunc = (processor._func if type(processor) is _FunctionProcessor
                                    else processor.process_request)
        self.rejects: Callable[[], bool] | None = (
            None if type(processor).reject_request is RequestProcessor.reject_request else processor.reject_request)
        self.call_many: ManyFunc | None = getattr(processor, "process_requests", None)


def exception_remark(exc: BaseException) -> str:
    """A short description of a handler failure, like Java's RemotingHelper.exceptionSimpleDesc."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ProcessorTable:
    def __init__(self) -> None:
        self._rows: dict[int, _Row] = {}
        self._default: _Row | None = None
        # handlers waiting: tasks, and futures answered by callback
        self._tasks: set[asyncio.Future[Any]] = set()
        # Every SYSTEM_ERROR answer (a body or header that cannot be read, a handler's failure)
        # is logged here, for every processor, rate-limited per code and address.
        self.refusals = RefusalLog(log)
        # Java's server RPC hooks, called in the one place every request passes: the ACL check
        # of a daemon with aclEnable=true, the rpc latency of one with metrics.
        self.rpc_hooks: list[RPCHook] = []

    def register(self, code: int, processor: RequestProcessor | ProcessorFunc,
                 max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        self._rows[int(code)] = _Row(_as_processor(processor), max_concurrency)

    def register_default(self, processor: RequestProcessor | ProcessorFunc,
                         max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        self._default = _Row(_as_processor(processor), max_concurrency)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Call ``hook`` around every request with a processor from now on, after the hooks
        registered before it (Java's registerRPCHook)."""
        self.rpc_hooks.append(hook)

    def codes(self) -> set[int]:
        """The request codes with a row of their own (the default row aside)."""
        return set(self._rows)

    def processor_for(self, code: int) -> RequestProcessor | None:
        row = self._rows.get(code) or self._default
        return row.processor if row else None

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def dispatch(self, conn: RemotingConnection, request: RemotingCommand, before_done: bool = False) -> None:
        """Hand ``request`` to its processor; ``before_done``: the hooks' ``do_before_request``
        already ran for it (dispatch_all calls them for a whole read first)."""
        row = self._rows.get(request.code) or self._default
        if row is None:
            # Java answers this even for oneway requests (docs/protocol.md#answering-requests).
            conn.write_command(request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"))
            return
        hooks = self.rpc_hooks
        if hooks and not before_done and not self._before(conn, request):
            return
        if (row.rejects is not None or row.in_flight >= row.limit) and not self._admitted(row, conn, request):
            return
        try:
            result = row.call(conn, request)
        except Exception as exc:
            result = _failed(conn, request, exc)
        if result is None or type(result) is RemotingCommand:
            if hooks:
                self._after(conn, request, result)
            _answer(conn, request, result, self.refusals)
        else:
            # type-ignored: neither None nor a RemotingCommand is the awaitable (exact-type test, not narrowed)
            self._start(row, conn, request, result)  # type: ignore[arg-type]

    def dispatch_all(self, conn: RemotingConnection, requests: list[RemotingCommand]) -> None:
        """The requests of one read, in order: each run of one code goes to its processor's
        ``process_requests`` when it has one, the rest to ``dispatch``. With RPC hooks, every
        request's ``do_before_request`` runs first and a refused one is answered at once; the
        runs are made of those let through."""
        rows = self._rows
        hooks = self.rpc_hooks
        if hooks:
            # a code without a processor is left to dispatch's REQUEST_CODE_NOT_SUPPORTED, unhooked
            requests = [request for request in requests
                        if (request.code not in rows and self._default is None) or self._before(conn, request)]
        i, n = 0, len(requests)
        while i < n:
            request = requests[i]
            code = request.code
            row = rows.get(code)
            if row is None or row.call_many is None or i + 1 == n or requests[i + 1].code != code:
                self.dispatch(conn, request, bool(hooks))
                i += 1
                continue
            j = i + 2
            while j < n and requests[j].code == code:
                j += 1
            if not self._admitted(row, conn, request):
                i += 1
                continue
            run = requests[i:j]
            try:
                results = row.call_many(conn, run)
            except Exception as exc:
                # A processor's fault, not a request's: which of them were handled is unknown.
                results = [_failed(conn, r, exc) for r in run]
            if not results:
                self.dispatch(conn, request, bool(hooks))
                i += 1
                continue
            for request, result in zip(run, results, strict=False):
                if result is None or type(result) is RemotingCommand:
                    if hooks:
                        self._after(conn, request, result)
                    _answer(conn, request, result, self.refusals)
                else:
                    # type-ignored: neither None nor a RemotingCommand is the awaitable (exact-type test, not narrowed)
                    self._start(row, conn, request, result)  # type: ignore[arg-type]
            i += len(results)

    def _before(self, conn: RemotingConnection, request: RemotingCommand) -> bool:
        """False, having answered the refusal, when a hook's ``do_before_request`` refuses the
        request (or raises: SYSTEM_ERROR); the hooks that ran before it are told the answer."""
        hooks = self.rpc_hooks
        addr = conn.remote_addr
        for i, hook in enumerate(hooks):
            try:
                refusal = hook.do_before_request(addr, request)
            except Exception as exc:
                refusal = _failed(conn, request, exc)
            if refusal is not None:
                for earlier in hooks[:i]:
                    _told(earlier, addr, request, refusal)
                _answer(conn, request, refusal, self.refusals)
                return False
        return True

    def _after(self, conn: RemotingConnection, request: RemotingCommand, response: RemotingCommand | None) -> None:
        addr = conn.remote_addr
        for hook in self.rpc_hooks:
            _told(hook, addr, request, response)

    def _admitted(self, row: _Row, conn: RemotingConnection, request: RemotingCommand) -> bool:
        """False, having answered SYSTEM_BUSY, when the row turns requests away now."""
        rejects = row.rejects
        if rejects is not None and rejects():
            busy: RemotingCommand | None = request.response(ResponseCode.SYSTEM_BUSY, REJECT_REMARK)
        elif row.in_flight >= row.limit:
            busy = None if request.is_oneway else request.response(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        else:
            return True
        if self.rpc_hooks:
            self._after(conn, request, busy)
        if busy is not None:
            conn.write_command(busy)
        return False

    def _start(self, row: _Row, conn: RemotingConnection, request: RemotingCommand,
               result: Awaitable[RemotingCommand | None]) -> None:
        """Answer when a handler's awaitable is done, running it inline until it first waits.
        A plain future is answered from its own callback: no task (a synced send's answer is
        one, and at 64 in flight to a SYNC_MASTER a task per send cost a fifth of the broker)."""
        row.in_flight += 1
        if isinstance(result, asyncio.Future):
            self._tasks.add(result)
            result.add_done_callback(functools.partial(self._answer_done, row, conn, request))
            return
        coro = self._run(row, conn, request, result, self)
        if _NATIVE_EAGER:
            # type-ignored: eager_start is 3.12's; _NATIVE_EAGER says it exists
            task = asyncio.Task(coro, eager_start=True)  # type: ignore[call-arg]
            if task.done():
                return
        else:
            # Python 3.11 has no eager tasks: run the handler's first step inline, and only when
            # it suspends (long polling, a group-commit flush) hand the rest of it to a Task.
            # Most requests (route look-ups, async-flush sends) finish in that first step, and
            # skipping the Task saves a quarter of a small request's cost.
            try:
                yielded = coro.send(None)
            except StopIteration:
                return
            task = asyncio.get_running_loop().create_task(_finish(coro, yielded))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _answer_done(self, row: _Row, conn: RemotingConnection, request: RemotingCommand,
                     done: asyncio.Future[RemotingCommand | None]) -> None:
        """A future handler result's answer, as ``_run`` gives a coroutine's; a cancelled one
        (shutdown's drain) is answered with nothing, as a cancelled task is."""
        self._tasks.discard(done)
        row.in_flight -= 1
        if done.cancelled():
            return
        exc = done.exception()
        if exc is None:
            response = done.result()
        elif isinstance(exc, Exception):
            response = _failed(conn, request, exc)
        else:  # a BaseException (SystemExit and the like) is not a handler's answer
            return
        if self.rpc_hooks:
            self._after(conn, request, response)
        _answer(conn, request, response, self.refusals)

    @staticmethod
    async def _run(row: _Row, conn: RemotingConnection, request: RemotingCommand,
                   pending: Awaitable[RemotingCommand | None], table: ProcessorTable) -> None:
        try:
            response = await pending
        except Exception as exc:
            response = _failed(conn, request, exc)
        finally:
            row.in_flight -= 1
        if table.rpc_hooks:
            table._after(conn, request, response)
        _answer(conn, request, response, table.refusals)

    async def drain(self, timeout: float) -> None:
        """Let in-flight handlers finish (bounded), then cancel what is left."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)


_NATIVE_EAGER = sys.version_info >= (3, 12)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)


class _Resume:
    """Awaitable that continues a coroutine which already yielded once outside any task.

    It forwards what the Task sends or throws (results, cancellation) exactly as ``await``
    would have, so the handler cannot tell its first step ran inline. Caveat on 3.11: during
    that first step ``asyncio.current_task()`` is None, so a handler must not enter
    ``asyncio.timeout()`` before its first suspension (``wait_for`` is fine).
    """

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, None], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, None]:
        coro, yielded = self._coro, self._yielded
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:
                try:
                    yielded = coro.throw(exc)
                except StopIteration:
                    return
                continue
            try:
                yielded = coro.send(sent)
            except StopIteration:
                return


async def _finish(coro: Coroutine[Any, Any, None], yielded: Any) -> None:
    await _Resume(coro, yielded)


def _failed(conn: RemotingConnection, request: RemotingCommand, exc: Exception) -> RemotingCommand:
    """The answer to a request its handler raised on: a RemotingCommandException's code and
    remark, else SYSTEM_ERROR. A ValueError is the request's fault (a header that cannot be read),
    logged with the answer as a refusal; anything else is a fault of the handler, whose traceback
    is logged here as well."""
    if isinstance(exc, RemotingCommandException):
        return request.response(exc.code, exc.remark)
    if not isinstance(exc, ValueError):
        log.warning("processor for code %s failed on request from %s", request.code, conn.remote_addr,
                    exc_info=exc)
    return request.response(ResponseCode.SYSTEM_ERROR, exception_remark(exc))


def _told(hook: RPCHook, addr: str, request: RemotingCommand, response: RemotingCommand | None) -> None:
    """``hook.do_after_response``, whose failure is logged and never stops the answer."""
    try:
        hook.do_after_response(addr, request, response)
    except Exception:
        log.exception("RPC hook %s failed after request code %s from %s", type(hook).__name__, request.code, addr)


def _answer(conn: RemotingConnection, request: RemotingCommand, response: RemotingCommand | None,
            refusals: RefusalLog) -> None:
    if response is None:
        return
    if response.code == _SYSTEM_ERROR:
        # Before the oneway check: a oneway request refused is answered with nothing, and this
        # line is then the only trace of it.
        refusals.refused(conn.remote_addr, request.code, response.remark)
    if request.flag & RPC_ONEWAY or not conn.is_open:
        return
    response.opaque = request.opaque
    response.flag |= RPC_TYPE_RESPONSE
    response.serialize_type = request.serialize_type
    conn.write_command(response)


def _as_processor(p: RequestProcessor | ProcessorFunc) -> RequestProcessor:
    return p if isinstance(p, RequestProcessor) else _FunctionProcessor(p)
