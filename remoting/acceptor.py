"""Acceptor: a listening socket whose accept loop survives running out of file descriptors.

``loop.create_server`` is not enough for a daemon. On uvloop, one ``accept`` failing with EMFILE
closes the listening socket for good (libuv reports the error to uvloop's listen callback,
which closes the server silently): the broker would stay up but never take another connection.
Plain asyncio pauses accepting for a second while the connection waits in the kernel's backlog.
Here the connection is refused at once, as libuv's own "EMFILE trick" does: one descriptor is
kept in reserve, and when ``accept`` fails for want of descriptors the reserve is released,
the waiting connection is accepted and closed (its client sees the connection closed and may try
another broker), and the reserve is taken again. A WARN line says so, once a second at most.
Netty, which Java's remoting uses, logs "Failed to create a new channel from an accepted socket"
and stops accepting for a second; closing the connection answers the client sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable

from rocketmq_py.remoting.tls import TlsMode, sniff_tls

log = logging.getLogger("rocketmq.remoting")

# accept's answers when the process or the system is out of a resource a socket needs.
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Connections taken per readiness callback, so a connection storm cannot hold the loop.
_ACCEPTS_PER_WAKEUP = 64
BACKLOG = 1024


class Acceptor:
    """Accepts connections on ``host:port`` and hands each to ``protocol_factory`` on the loop."""

    def __init__(self, protocol_factory: Callable[[], asyncio.BaseProtocol], *, tls_mode: TlsMode = TlsMode.DISABLED,
                 ssl_context: ssl.SSLContext | None = None, first_byte_timeout: float | None = None,
                 handshake_timeout: float = 10.0) -> None:
        self._factory = protocol_factory
        # permissive / enforcing TLS (remoting/tls.py): each connection's first byte chooses
        self._tls_mode = tls_mode
        self._ssl_context = ssl_context
        self._first_byte_timeout = first_byte_timeout
        self._handshake_timeout = handshake_timeout
        self.sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reserve = -1
        self._tasks: set[asyncio.Task[object]] = set()
        self._last_warning = 0.0
        self.refused = 0  # connections refused for want of descriptors (tests and metrics read it)

    async def start(self, host: str, port: int) -> None:
        loop = self._loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
            self._reserve = os.open(os.devnull, os.O_RDONLY)
            loop.add_reader(sock.fileno(), self._on_readable)
        except BaseException:
            sock.close()
            self._close_reserve()
            raise
        self.sock = sock

    @property
    def port(self) -> int:
        if self.sock is None:
            raise RuntimeError("server is not listening")
        return int(self.sock.getsockname()[1])

    def _on_readable(self) -> None:
        sock = self.sock
        if sock is None:
            return
        for _ in range(_ACCEPTS_PER_WAKEUP):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    if self._refuse_one(exc):
                        continue
                    return
                log.error("accept failed on %s: %s", sock.getsockname(), exc)
                return
            conn.setblocking(False)
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            assert self._loop is not None
            task = self._loop.create_task(self._connect(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket) -> None:
        assert self._loop is not None
        if self._tls_mode is not TlsMode.DISABLED:
            await self._connect_tls(conn)
            return
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError as exc:
            log.warning("dropping an accepted connection: %s", exc)
            conn.close()

    async def _connect_tls(self, conn: socket.socket) -> None:
        """A connection of a TLS-minded server: TLS when its first byte opens a handshake, else
        plaintext (permissive) or closed with a WARN line (enforcing)."""
        assert self._loop is not None
        peer = "?"
        try:
            with contextlib.suppress(OSError):
                peer = ":".join(str(p) for p in conn.getpeername()[:2])
            tls = await sniff_tls(conn, self._first_byte_timeout)
            if tls is None:
                conn.close()
                return
            if not tls and self._tls_mode is TlsMode.ENFORCING:
                log.warning("closing the plaintext connection from %s: tls.server.mode=enforcing takes TLS only",
                            peer)
                conn.close()
                return
            await self._loop.connect_accepted_socket(
                self._factory, conn, ssl=self._ssl_context if tls else None,
                ssl_handshake_timeout=self._handshake_timeout if tls else None)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            log.info("connection from %s closed before it was served: %s", peer, str(exc) or type(exc).__name__)
            conn.close()

    def _refuse_one(self, exc: OSError) -> bool:
        """Accept the connection waiting in the backlog with the reserve descriptor and close it;
        False when even that failed and accepting pauses for a second."""
        assert self.sock is not None
        self._close_reserve()
        try:
            conn, peer = self.sock.accept()
        except OSError:
            peer = None
        else:
            conn.close()
            self.refused += 1
        with contextlib.suppress(OSError):
            self._reserve = os.open(os.devnull, os.O_RDONLY)
        now = time.monotonic()
        if now - self._last_warning >= 1.0:
            self._last_warning = now
            log.warning("too many open files (%s): refused the connection from %s (%d refused so far); "
                        "raise the open-file limit (ulimit -n) or close idle clients", exc.strerror, peer,
                        self.refused)
        if peer is None:
            # Not even the reserve made room (the whole system is out of files, say): stop reading
            # the listening socket for a second rather than spin on it (asyncio's own back-off).
            assert self._loop is not None
            self._loop.remove_reader(self.sock.fileno())
            self._loop.call_later(1.0, self._resume)
            return False
        return True

    def _resume(self) -> None:
        if self.sock is not None and self._loop is not None:
            if self._reserve < 0:
                with contextlib.suppress(OSError):
                    self._reserve = os.open(os.devnull, os.O_RDONLY)
            self._loop.add_reader(self.sock.fileno(), self._on_readable)

    def _close_reserve(self) -> None:
        fd, self._reserve = self._reserve, -1
        if fd >= 0:
            os.close(fd)

    async def close(self) -> None:
        """Stop accepting; connections being set up finish (they are the server's to close)."""
        sock, self.sock = self.sock, None
        if sock is not None:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()
        self._close_reserve()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
