"""Prometheus metrics shared by the daemons: an HTTP exporter on the daemon's own event loop, and
RocketMQ 5's rpc latency histogram (only the codes seen).

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
from bisect import bisect_left
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import HistogramMetricFamily

from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import AddressInUseError
from rocketmq_py.remoting.processor import ProcessorResult, RequestProcessor

if TYPE_CHECKING:
    from rocketmq_py.remoting.connection import RemotingConnection
    from rocketmq_py.remoting.server import RemotingServer

log = logging.getLogger("rocketmq.metrics")

# RemotingMetricsManager's buckets for rocketmq_rpc_latency, in milliseconds (docs/metrics.md).
RPC_LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
MAX_REQUEST_HEAD = 16 * 1024

_CODE_NAMES = {c.value: c.name for c in RequestCode}
_RESPONSE_NAMES = {c.value: c.name.lower() for c in ResponseCode}


def request_code_name(code: int) -> str:
    return _CODE_NAMES.get(code, str(code))


class Buckets:
    """One histogram series: cumulative at exposition, plain counts here (one add per observation)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def exposition(self) -> tuple[list[tuple[str, float]], float]:
        """Prometheus buckets (``le`` upper bounds, cumulative, +Inf last) and the sum."""
        running = 0
        out: list[tuple[str, float]] = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out, self.total


class HistogramSeries:
    """A histogram whose series exist only once observed: a label set never seen exports nothing
    (Prometheus-client's labelled Histogram does the same, but the old wrappers asked for every
    request code's child up front, 1,026 series of codes never used)."""

    def __init__(self, name: str, documentation: str, labels: list[str], bounds: tuple[float, ...]) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self.bounds = bounds
        self.series: dict[tuple[str, ...], Buckets] = {}

    def child(self, values: tuple[str, ...]) -> Buckets:
        found = self.series.get(values)
        if found is None:
            found = self.series[values] = Buckets(self.bounds)
        return found

    def family(self, const_labels: list[str], const_values: list[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.documentation, labels=[*const_labels, *self.labels])
        for values, buckets in self.series.items():
            points, total = buckets.exposition()
            family.add_metric([*const_values, *values], points, total)
        return family


class RpcLatency(HistogramSeries):
    """RocketMQ 5's ``rocketmq_rpc_latency`` (unit milliseconds, so its Prometheus name ends in
    ``_milliseconds`` as the OpenTelemetry exporter writes it): one series per request code,
    response code, long-polling flag and result actually seen; codes by their lower-case
    RequestCode / ResponseCode names, as Java's RemotingHelper describes them."""

    LABELS = ["protocol_type", "request_code", "response_code", "is_long_polling", "result"]

    def __init__(self) -> None:
        super().__init__("rocketmq_rpc_latency_milliseconds", "Rpc latency", self.LABELS, RPC_LATENCY_BUCKETS_MS)
        self._by_codes: dict[tuple[int, int, bool, bool], Buckets] = {}

    def observe(self, request: RemotingCommand, response: RemotingCommand | None, elapsed_ms: float,
                long_polling: bool = False) -> None:
        """One answered request; a request with no answer yet (a held pull) is observed when it
        is answered, as Java records it when the response is written."""
        oneway = request.is_oneway
        if response is None and not oneway:
            return
        key = (request.code, -1 if response is None else response.code, oneway, long_polling)
        buckets = self._by_codes.get(key)
        if buckets is None:
            response_name = "" if key[1] == -1 else _RESPONSE_NAMES.get(key[1], str(key[1]))
            buckets = self._by_codes[key] = self.child((
                "remoting", request_code_name(request.code).lower(), response_name,
                "true" if long_polling else "false", "oneway" if oneway else "success"))
        buckets.observe(elapsed_ms)


RequestObserver = Callable[[RemotingCommand, RemotingCommand | None], None]


class TimedProcessor(RequestProcessor):
    """Times one row's processor; ``observe`` may also look at the request and its response."""

    # ``process_requests`` is a slot, set only when the inner processor takes runs: the table
    # asks for it, and a wrapper must not hide a run-taking processor nor invent one.
    __slots__ = ("_inner", "_latency", "_observe", "process_requests")

    def __init__(self, inner: RequestProcessor, latency: RpcLatency, observe: RequestObserver | None = None) -> None:
        self._inner = inner
        self._latency = latency
        self._observe = observe
        if getattr(inner, "process_requests", None) is not None:
            self.process_requests = self._process_run

    def _process_run(self, conn: RemotingConnection, requests: list[RemotingCommand]) -> list[ProcessorResult]:
        """Each request of a run is observed with the run's time: what it waited for its answer."""
        started = time.perf_counter()
        # type-ignored: called only for processors the table marked as taking runs, which define process_requests
        results = self._inner.process_requests(conn, requests)  # type: ignore[attr-defined]
        return [self._observed(request, result, started) if result is None or type(result) is RemotingCommand
                else self._awaited(request, result, started)
                for request, result in zip(requests, results, strict=False)]

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> ProcessorResult:
        started = time.perf_counter()
        result = self._inner.process_request(conn, request)
        if result is None or type(result) is RemotingCommand:
            return self._observed(request, result, started)
        # type-ignored: neither None nor a RemotingCommand is the awaitable (an exact-type test, not narrowed)
        return self._awaited(request, result, started)  # type: ignore[arg-type]

    async def _awaited(self, request: RemotingCommand, pending: Awaitable[RemotingCommand | None],
                       started: float) -> RemotingCommand | None:
        return self._observed(request, await pending, started)

    def _observed(self, request: RemotingCommand, response: RemotingCommand | None,
                  started: float) -> RemotingCommand | None:
        self._latency.observe(request, response, (time.perf_counter() - started) * 1000.0)
        if self._observe is not None:
            self._observe(request, response)
        return response

    def reject_request(self) -> bool:
        return self._inner.reject_request()


def instrument_server(server: RemotingServer, latency: RpcLatency,
                      observers: dict[int, RequestObserver] | None = None) -> None:
    observers = observers or {}
    server.processors.wrap_processors(
        lambda code, p: TimedProcessor(p, latency, observers.get(code) if code is not None else None))


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
