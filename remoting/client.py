"""asyncio ``RemotingClient``: one long-lived connection per address, shared by every caller.

Like Java's NettyRemotingClient: a connection is made on first use and reused; after a drop the
next call reconnects; a periodic scan fails async calls past their deadline and closes idle
connections (one timer per event loop and interval for all the clients on it); RPC hooks run just
before each request is written and just after its response arrives (ACL signing is one); and a
client-side processor table answers what a broker asks (transaction checks, consumer-ids-changed).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import weakref
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from rocketmq_py.common.busy_poll import DEFAULT_BUSY_POLL_MAX_MICROS, busy_poller
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import DEFAULT_MAX_PENDING, ConnectionEvents, InvokeCallback, RemotingConnection
from rocketmq_py.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rocketmq_py.remoting.frame import DEFAULT_MAX_FRAME_SIZE
from rocketmq_py.remoting.processor import DEFAULT_MAX_CONCURRENCY, ProcessorFunc, ProcessorTable, RequestProcessor
from rocketmq_py.remoting.rpc_hook import RPCHook

log = logging.getLogger("rocketmq.remoting")


@dataclass
class ClientConfig:
    connect_timeout: float = 3.0
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    # Java clients close a channel idle for 120 s (clientChannelMaxIdleTimeSeconds).
    channel_max_idle: float = 120.0
    scan_interval: float = 1.0
    # Calls awaiting answers per connection; past it a call fails at once instead of queueing.
    max_pending: int = DEFAULT_MAX_PENDING
    # How long the loop may keep polling after a read before it sleeps (common/busy_poll.py).
    busy_poll_max_micros: int = DEFAULT_BUSY_POLL_MAX_MICROS
    # TLS on every connection this client makes (Java's useTLS / tls.enable); None: plaintext.
    # remoting.tls.client_ssl_context builds one from the tls.client.* keys.
    ssl_context: ssl.SSLContext | None = None


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise RemotingConnectError(addr, "address is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    def __init__(self, config: ClientConfig | None = None, rpc_hooks: Sequence[RPCHook] = (),
                 listener: ConnectionEvents | None = None) -> None:
        self.config = config or ClientConfig()
        self.rpc_hooks: list[RPCHook] = list(rpc_hooks)
        self.processors = ProcessorTable()
        self.listener = listener or ConnectionEvents()
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._housekeeper: _Housekeeper | None = None
        self._closed = False

    def register_processor(self, code: int, processor: RequestProcessor | ProcessorFunc,
                           max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        self.processors.register(code, processor, max_concurrency)

    def start(self) -> None:
        if self._housekeeper is None:
            self._housekeeper = _housekeeper(asyncio.get_running_loop(), self.config.scan_interval)
            self._housekeeper.add(self)

    # -- connections ------------------------------------------------------------------------

    async def get_connection(self, addr: str) -> RemotingConnection:
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn
        if self._closed:
            raise RemotingConnectError(addr, "client is shut down")
        waiting = self._connecting.get(addr)
        if waiting is not None:
            return await asyncio.shield(waiting)
        fut: asyncio.Future[RemotingConnection] = asyncio.get_running_loop().create_future()
        self._connecting[addr] = fut
        try:
            conn = await self._connect(addr)
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # retrieved: other waiters re-raise it themselves
            raise
        else:
            fut.set_result(conn)
            self._connections[addr] = conn
            return conn
        finally:
            self._connecting.pop(addr, None)

    async def _connect(self, addr: str) -> RemotingConnection:
        host, port = split_addr(addr)
        loop = asyncio.get_running_loop()
        cfg = self.config
        try:
            async with asyncio.timeout(cfg.connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: RemotingConnection(self.processors, _ClientEvents(self, addr),
                                               max_frame_size=cfg.max_frame_size, max_pending=cfg.max_pending,
                                               poller=busy_poller(cfg.busy_poll_max_micros, loop)),
                    host, port, ssl=cfg.ssl_context,
                    ssl_handshake_timeout=cfg.connect_timeout if cfg.ssl_context is not None else None)
        except TimeoutError:
            raise RemotingConnectError(addr, f"timed out after {cfg.connect_timeout}s") from None
        except OSError as exc:
            raise RemotingConnectError(addr, exc.strerror or str(exc)) from None
        self.start()
        return conn

    def close_connection(self, addr: str) -> None:
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close("closed by client")

    def set_request_serialize_type(self, addr: str, serialize_type: int | None) -> None:
        """Write later requests to ``addr`` in ``serialize_type`` (None: each request's own).
        It holds for the current connection only: after a reconnect the peer may be another
        server, so it must offer again."""
        conn = self._connections.get(addr)
        if conn is not None:
            conn.request_serialize_type = serialize_type

    def _forget(self, addr: str, conn: RemotingConnection) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]

    # -- calls ------------------------------------------------------------------------------

    def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> Awaitable[RemotingCommand]:
        """Request/response. Connection time counts against ``timeout``, as in Java's invokeSync.

        Not a coroutine on the common path (connected, no hooks): it returns the connection's
        future itself, saving a frame per call on the hottest path of every client.
        """
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            hooks = self.rpc_hooks
            if not hooks:
                return conn.invoke(request, timeout)
            # Connected, with hooks (an ACL signer): still no coroutine; the after-hooks run when
            # the answer completes the future.
            for hook in hooks:
                hook.do_before_request(addr, request)
            fut = conn.invoke(request, timeout)
            fut.add_done_callback(lambda f: _after_response(hooks, addr, request, f))
            return fut
        return self._invoke_slow(addr, request, timeout)

    async def _invoke_slow(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        start = time.monotonic()
        conn = await self.get_connection(addr)
        for hook in self.rpc_hooks:
            hook.do_before_request(addr, request)
        remaining = timeout - (time.monotonic() - start)
        if remaining <= 0:
            raise RemotingTimeoutError(addr, timeout)
        response = await conn.invoke(request, remaining)
        for hook in self.rpc_hooks:
            hook.do_after_response(addr, request, response)
        return response

    async def invoke_async(self, addr: str, request: RemotingCommand, timeout: float,
                           callback: InvokeCallback) -> None:
        """Send and return at once; ``callback(response, error)`` runs when the answer (or the
        timeout, found by the periodic scan, or the connection's close) comes."""
        conn = await self.get_connection(addr)
        for hook in self.rpc_hooks:
            hook.do_before_request(addr, request)
        hooks = self.rpc_hooks

        def done(response: RemotingCommand | None, error: BaseException | None) -> None:
            if response is not None:
                for hook in hooks:
                    hook.do_after_response(addr, request, response)
            callback(response, error)

        conn.invoke_async(request, timeout, done)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        conn = await self.get_connection(addr)
        for hook in self.rpc_hooks:
            hook.do_before_request(addr, request)
        conn.invoke_oneway(request)

    # -- housekeeping -----------------------------------------------------------------------

    def _scan(self, now: float) -> None:
        """Fail async calls past their deadline; close connections idle past channel_max_idle."""
        max_idle = self.config.channel_max_idle
        for addr, conn in list(self._connections.items()):
            conn.scan_expired(now)
            if max_idle > 0 and now - conn.last_activity > max_idle and conn.pending_count == 0:
                log.info("closing idle connection to %s", addr)
                self.close_connection(addr)

    async def close(self) -> None:
        self._closed = True
        if self._housekeeper is not None:
            self._housekeeper.remove(self)
            self._housekeeper = None
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close("client shutdown")
        for conn in conns:
            await conn.wait_closed()
        await self.processors.drain(1.0)


class _Housekeeper:
    """The periodic scan (RemotingClient._scan) of every client on one event loop with one scan
    interval, by one timer.

    Java runs a timer per NettyRemotingClient, and a process usually holds one client; but one
    holding many (bench/scale.py's 1,000, each standing in for a producer) woke a task per client
    each interval: at 1,000 clients that cost the process 2-3 µs of CPU per message at
    10,000-15,000 messages a second (a task's step, its sleep's future and timer, and the getpid
    that asyncio's get_running_loop makes on CPython 3.11). The timer stops when its last client
    closes, so an idle loop keeps none."""

    __slots__ = ("__weakref__", "_clients", "_interval", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self._loop = loop
        self._interval = interval
        self._clients: dict[RemotingClient, None] = {}  # a set in the order they came
        self._timer: asyncio.TimerHandle | None = None

    def add(self, client: RemotingClient) -> None:
        self._clients[client] = None
        if self._timer is None:
            self._timer = self._loop.call_later(self._interval, self._scan)

    def remove(self, client: RemotingClient) -> None:
        self._clients.pop(client, None)
        if not self._clients:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _scan(self) -> None:
        now = time.monotonic()
        for client in list(self._clients):
            try:
                client._scan(now)
            except Exception:  # one client's failure must not end the others' scans
                log.exception("housekeeping of a remoting client failed")
        self._timer = self._loop.call_later(self._interval, self._scan)


# Held by their clients and their loop's timer only, so that neither a loop nor a client that was
# never closed is kept alive by this module; keyed by the loop's id, checked against the loop.
_housekeepers: weakref.WeakValueDictionary[tuple[int, float], _Housekeeper] = weakref.WeakValueDictionary()


def _housekeeper(loop: asyncio.AbstractEventLoop, interval: float) -> _Housekeeper:
    keeper = _housekeepers.get((id(loop), interval))
    if keeper is None or keeper._loop is not loop:
        keeper = _housekeepers[(id(loop), interval)] = _Housekeeper(loop, interval)
    return keeper


def _after_response(hooks: list[RPCHook], addr: str, request: RemotingCommand,
                    fut: asyncio.Future[RemotingCommand]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    response = fut.result()
    for hook in hooks:
        hook.do_after_response(addr, request, response)


class _ClientEvents(ConnectionEvents):
    def __init__(self, client: RemotingClient, addr: str) -> None:
        self._client = client
        self._addr = addr

    def on_connect(self, conn: RemotingConnection) -> None:
        self._client.listener.on_connect(conn)

    def on_close(self, conn: RemotingConnection) -> None:
        self._client._forget(self._addr, conn)
        self._client.listener.on_close(conn)

    def on_exception(self, conn: RemotingConnection, exc: BaseException) -> None:
        self._client.listener.on_exception(conn, exc)
