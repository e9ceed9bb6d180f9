"""RocketMQ 5's rpc latency histogram (RemotingMetricsManager's, only the codes seen), and the
timing of each processor that feeds it; the exporter serving it is common/metrics.py's.

Why wrap processors rather than time every dispatch: a daemon without ``metricsPort`` must not
pay a single extra call per request, so the timing wrappers are installed only when metrics are
on (``ProcessorTable.wrap_processors``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rocketmq_py.common.metrics import Buckets, HistogramSeries
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.processor import ProcessorResult, RequestProcessor

if TYPE_CHECKING:
    from rocketmq_py.remoting.connection import RemotingConnection
    from rocketmq_py.remoting.server import RemotingServer

# RemotingMetricsManager's buckets for rocketmq_rpc_latency, in milliseconds (docs/metrics.md).
RPC_LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)

_CODE_NAMES = {c.value: c.name for c in RequestCode}
_RESPONSE_NAMES = {c.value: c.name.lower() for c in ResponseCode}


def request_code_name(code: int) -> str:
    return _CODE_NAMES.get(code, str(code))


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
