"""Prometheus exposition shared by the daemons: an HTTP exporter on the daemon's own event loop,
and histograms whose series exist only once observed.

Why not prometheus-client's ``start_http_server``: it serves from a thread, and the collectors read
broker and NameServer tables that only the event loop may touch. Serving on the loop makes every
scrape a consistent read with no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_left

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from rocketmq_py.common.exceptions import AddressInUseError

log = logging.getLogger("rocketmq.metrics")

MAX_REQUEST_HEAD = 16 * 1024


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


async def start_exporter(server: MetricsHttpServer, hint: str) -> None:
    """The exporter listening and its address announced: logged, and printed for the tests and
    scripts that wait for the line; a port in use carries ``hint``, the option that moves it."""
    try:
        await server.start()
    except AddressInUseError as exc:
        raise AddressInUseError(exc.addr, hint) from None
    line = f"The metrics exporter listening on {server.address}"
    log.info(line)
    print(line, flush=True)


class DaemonMetrics:
    """One daemon's registry (its collector and the process's own metrics) and its exporter, none
    when ``port`` is negative; ``registry`` given, two daemons in one process share one exporter."""

    def __init__(self, collector: Collector, port: int, host: str, registry: CollectorRegistry | None) -> None:
        self.registry = registry or CollectorRegistry()
        self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        self.server = MetricsHttpServer(self.registry, host, port) if port >= 0 else None

    async def start(self, hint: str = "") -> None:
        if self.server is not None:
            await start_exporter(self.server, hint)

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()
