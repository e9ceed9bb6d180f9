"""RocketMQ 5's rpc latency histogram (RemotingMetricsManager's, only the codes seen), and the
RPC hook that feeds it; the exporter serving it is common/metrics.py's.

Requests are timed by an RPC hook (``RpcLatencyHook``) registered only when metrics are on: a
daemon without ``metricsPort`` has an empty hook list, checked once per request, and calls
nothing.
"""

from __future__ import annotations

import time

from rocketmq_py.common.metrics import Buckets, HistogramSeries
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand

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


class RpcLatencyHook:
    """The RPC hook that times every request a server's table dispatches, from its hooks'
    ``do_before_request`` to the answer (a oneway request's to its processor's end), into
    ``rocketmq_rpc_latency``. A pull the broker holds is answered outside the table: the broker's
    ConsumeMessageHook observes it when it is answered."""

    __slots__ = ("_latency", "_started")

    def __init__(self, latency: RpcLatency) -> None:
        self._latency = latency
        # id(request) -> time.perf_counter() at do_before_request; the table tells do_after_response
        # of every request whose hooks ran, so each entry leaves with its answer.
        self._started: dict[int, float] = {}

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self._started[id(request)] = time.perf_counter()

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        started = self._started.pop(id(request), None)
        if started is not None:
            self._latency.observe(request, response, (time.perf_counter() - started) * 1000.0)
