"""asyncio ``RemotingServer``: a listener, a processor table, and housekeeping.

The server owns its connections: it fires channel events (connect, close, idle, exception) for
the daemons' bookkeeping (a NameServer drops a broker whose connection closed; a broker forgets
a client), closes connections idle past ``channel_max_idle`` (Java's 120 s
``serverChannelMaxIdleTimeSeconds``), and sweeps expired server-to-client calls.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass

from rocketmq_py.common.busy_poll import DEFAULT_BUSY_POLL_MAX_MICROS, busy_poller
from rocketmq_py.common.exceptions import AddressInUseError
from rocketmq_py.remoting.acceptor import Acceptor
from rocketmq_py.remoting.connection import ConnectionEvents, RemotingConnection
from rocketmq_py.remoting.frame import DEFAULT_MAX_FRAME_SIZE
from rocketmq_py.remoting.processor import DEFAULT_MAX_CONCURRENCY, ProcessorFunc, ProcessorTable, RequestProcessor
from rocketmq_py.remoting.rpc_hook import RPCHook
from rocketmq_py.remoting.tls import TlsMode

log = logging.getLogger("rocketmq.remoting")


@dataclass
class ServerConfig:
    host: str = "0.0.0.0"
    port: int = 0
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    channel_max_idle: float = 120.0
    scan_interval: float = 1.0
    shutdown_grace: float = 5.0
    # How long the loop may keep polling after a read before it sleeps (common/busy_poll.py).
    busy_poll_max_micros: int = DEFAULT_BUSY_POLL_MAX_MICROS
    # tls.server.mode and the context its TLS connections use (remoting/tls.py).
    tls_mode: TlsMode = TlsMode.DISABLED
    ssl_context: ssl.SSLContext | None = None


class _ServerEvents(ConnectionEvents):
    def __init__(self, server: RemotingServer) -> None:
        self._server = server

    def on_connect(self, conn: RemotingConnection) -> None:
        self._server.connections.add(conn)
        self._server.listener.on_connect(conn)

    def on_close(self, conn: RemotingConnection) -> None:
        self._server.connections.discard(conn)
        self._server.listener.on_close(conn)

    def on_idle(self, conn: RemotingConnection) -> None:
        self._server.listener.on_idle(conn)

    def on_exception(self, conn: RemotingConnection, exc: BaseException) -> None:
        self._server.listener.on_exception(conn, exc)


class RemotingServer:
    def __init__(self, config: ServerConfig | None = None, listener: ConnectionEvents | None = None) -> None:
        self.config = config or ServerConfig()
        self.listener = listener or ConnectionEvents()
        self.processors = ProcessorTable()
        self.connections: set[RemotingConnection] = set()
        self._events = _ServerEvents(self)
        self._acceptor: Acceptor | None = None
        self._server: asyncio.base_events.Server | None = None  # where the loop has no add_reader (Windows)
        self._housekeeping: asyncio.Task[None] | None = None

    def register_processor(self, code: int, processor: RequestProcessor | ProcessorFunc,
                           max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        self.processors.register(code, processor, max_concurrency)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Call ``hook`` around every request this server dispatches (Java's registerRPCHook)."""
        self.processors.register_rpc_hook(hook)

    def register_default_processor(self, processor: RequestProcessor | ProcessorFunc,
                                   max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        self.processors.register_default(processor, max_concurrency)

    @property
    def port(self) -> int:
        """The bound port (useful when the config asked for port 0)."""
        if self._acceptor is not None:
            return self._acceptor.port
        if self._server is None or not self._server.sockets:
            raise RuntimeError("server is not listening")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        poller = busy_poller(cfg.busy_poll_max_micros, loop)

        def factory() -> RemotingConnection:
            return RemotingConnection(self.processors, self._events, max_frame_size=cfg.max_frame_size, poller=poller)

        if cfg.tls_mode is not TlsMode.DISABLED and cfg.ssl_context is None:
            raise ValueError(f"tls.server.mode={cfg.tls_mode.value} needs an SSL context")
        acceptor = Acceptor(factory, tls_mode=cfg.tls_mode, ssl_context=cfg.ssl_context,
                            first_byte_timeout=cfg.channel_max_idle or None)
        try:
            try:
                await acceptor.start(cfg.host, cfg.port)
                self._acceptor = acceptor
            except NotImplementedError:  # a proactor loop: its own accept loop, without the EMFILE refusal
                if cfg.tls_mode is TlsMode.PERMISSIVE:
                    raise ValueError("tls.server.mode=permissive needs a selector event loop; use enforcing") from None
                self._server = await loop.create_server(factory, cfg.host, cfg.port, reuse_address=True,
                                                        ssl=cfg.ssl_context)
        except OSError as exc:
            raise AddressInUseError.check(exc, cfg.host, cfg.port) from None
        self._housekeeping = loop.create_task(self._housekeep())

    async def _housekeep(self) -> None:
        cfg = self.config
        while True:
            await asyncio.sleep(cfg.scan_interval)
            now = time.monotonic()
            for conn in list(self.connections):
                conn.scan_expired(now)
                if cfg.channel_max_idle > 0 and now - conn.last_activity > cfg.channel_max_idle:
                    log.info("closing idle connection %s", conn.remote_addr)
                    self._events.on_idle(conn)
                    conn.close("idle")

    async def close(self) -> None:
        """Stop accepting, let running handlers finish (bounded), then close every connection."""
        if self._server is None and self._acceptor is None:
            return
        if self._acceptor is not None:
            await self._acceptor.close()
        if self._server is not None:
            self._server.close()
        if self._housekeeping:
            self._housekeeping.cancel()
        await self.processors.drain(self.config.shutdown_grace)
        conns = list(self.connections)
        for conn in conns:
            conn.close("server shutdown")
        for conn in conns:
            await conn.wait_closed()
        if self._server is not None:
            await self._server.wait_closed()
        self._server = self._acceptor = None
