"""Prometheus metrics shared by the daemons: an HTTP exporter on the daemon's own event loop, and
request-latency histograms by request code.

Why not prometheus-client's ``start_http_server``: it serves from a thread, and the collectors read
broker and NameServer tables that only the event loop may touch. Serving on the loop makes every
scrape a consistent read with no locks. Why wrap processors rather than time every dispatch:
a daemon without ``metricsPort`` must not pay a single extra call per request, so the timing
wrappers are installed only when metrics are on (``ProcessorTable.wrap_processors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest

from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import AddressInUseError
from rocketmq_py.remoting.processor import ProcessorResult, RequestProcessor

if TYPE_CHECKING:
    from rocketmq_py.remoting.connection import RemotingConnection
    from rocketmq_py.remoting.server import RemotingServer

log = logging.getLogger("rocketmq.metrics")

# Seconds; from a cached route look-up (~100 us) to a held long poll (15 s).
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0, 30.0)
MAX_REQUEST_HEAD = 16 * 1024

_CODE_NAMES = {c.value: c.name for c in RequestCode}


def request_code_name(code: int) -> str:
    return _CODE_NAMES.get(code, str(code))


def request_latency_histogram(registry: CollectorRegistry, prefix: str) -> Histogram:
    return Histogram(f"{prefix}_request_latency_seconds", "Time from dispatch to response, by request code",
                     ["code", "name"], buckets=LATENCY_BUCKETS, registry=registry)


RequestObserver = Callable[[RemotingCommand, RemotingCommand | None], None]


class TimedProcessor(RequestProcessor):
    """Times one row's processor; ``observe`` may also look at the request and its response."""

    # ``process_requests`` is a slot, set only when the inner processor takes runs: the table
    # asks for it, and a wrapper must not hide a run-taking processor nor invent one.
    __slots__ = ("_child", "_histogram", "_inner", "_observe", "process_requests")

    def __init__(self, inner: RequestProcessor, histogram: Histogram, code: int | None,
                 observe: RequestObserver | None = None) -> None:
        self._inner = inner
        self._histogram = histogram
        self._child = histogram.labels(str(code), request_code_name(code)) if code is not None else None
        self._observe = observe
        if getattr(inner, "process_requests", None) is not None:
            self.process_requests = self._process_run

    def _process_run(self, conn: RemotingConnection, requests: list[RemotingCommand]) -> list[ProcessorResult]:
        """Each request of a run is observed with the run's time: what it waited for its answer."""
        started = time.perf_counter()
        results = self._inner.process_requests(conn, requests)  # type: ignore[attr-defined]
        return [self._observed(request, result, started) if result is None or type(result) is RemotingCommand
                else self._awaited(request, result, started)
                for request, result in zip(requests, results, strict=False)]

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> ProcessorResult:
        started = time.perf_counter()
        result = self._inner.process_request(conn, request)
        if result is None or type(result) is RemotingCommand:
            return self._observed(request, result, started)
        return self._awaited(request, result, started)  # type: ignore[arg-type]

    async def _awaited(self, request: RemotingCommand, pending: Awaitable[RemotingCommand | None],
                       started: float) -> RemotingCommand | None:
        return self._observed(request, await pending, started)

    def _observed(self, request: RemotingCommand, response: RemotingCommand | None,
                  started: float) -> RemotingCommand | None:
        child = self._child or self._histogram.labels(str(request.code), request_code_name(request.code))
        child.observe(time.perf_counter() - started)
        if self._observe is not None:
            self._observe(request, response)
        return response

    def reject_request(self) -> bool:
        return self._inner.reject_request()


def instrument_server(server: RemotingServer, histogram: Histogram,
                      observers: dict[int, RequestObserver] | None = None) -> None:
    observers = observers or {}
    server.processors.wrap_processors(
        lambda code, p: TimedProcessor(p, histogram, code, observers.get(code) if code is not None else None))


class MetricsHttpServer:
    """GET /metrics (any path, as prometheus-client's server) on the daemon's loop."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.requested_port = port
        self._server: asyncio.base_events.Server | None = None

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            raise RuntimeError("metrics server is not listening")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"{host}:{self.port}"

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.requested_port, reuse_address=True)
        except OSError as exc:
            raise AddressInUseError.check(exc, self.host, self.requested_port) from None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            if len(head) > MAX_REQUEST_HEAD:
                raise ValueError("request head too large")
            method = head.split(b" ", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, body, ctype = b"405 Method Not Allowed", b"only GET\n", b"text/plain"
            else:
                status, body, ctype = b"200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST.encode()
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                         + (body if method != b"HEAD" else b""))
            await writer.drain()
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError) as exc:
            log.debug("metrics request failed: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
