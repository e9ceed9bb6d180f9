"""NameServer metrics for Prometheus (``metricsPort``): the route tables' sizes read at scrape time,
plus request latency by code (remoting.metrics, installed only when metrics are on)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from rocketmq_py.remoting.metrics import MetricsHttpServer, instrument_server, request_latency_histogram

if TYPE_CHECKING:
    from rocketmq_py.namesrv.controller import NamesrvController


class NamesrvMetricsCollector(Collector):
    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller

    def collect(self) -> Iterator[GaugeMetricFamily]:
        routes = self.controller.route_info_manager
        brokers = GaugeMetricFamily("rocketmq_namesrv_brokers", "Live broker addresses per cluster",
                                    labels=["cluster"])
        for cluster, names in routes.cluster_addr_table.items():
            addrs = [a for n in names if n in routes.broker_addr_table
                     for a in routes.broker_addr_table[n].brokerAddrs.values() if a in routes.broker_live_table]
            brokers.add_metric([cluster], len(addrs))
        yield brokers
        topics = GaugeMetricFamily("rocketmq_namesrv_topics", "Topics with a route")
        topics.add_metric([], len(routes.topic_queue_table))
        yield topics
        kv = GaugeMetricFamily("rocketmq_namesrv_kv_configs", "KV config entries per namespace", labels=["namespace"])
        for namespace, table in self.controller.kv_config_manager.config_table.items():
            kv.add_metric([namespace], len(table))
        yield kv
        conns = GaugeMetricFamily("rocketmq_namesrv_connections", "Open connections (brokers and clients)")
        conns.add_metric([], len(self.controller.remoting_server.connections))
        yield conns


class NamesrvMetrics:
    def __init__(self, controller: NamesrvController, port: int, host: str,
                 registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.registry.register(NamesrvMetricsCollector(controller))
        instrument_server(controller.remoting_server, request_latency_histogram(self.registry, "rocketmq_namesrv"))
        self.server = MetricsHttpServer(self.registry, host, port) if port >= 0 else None

    async def start(self) -> None:
        if self.server is not None:
            await self.server.start()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()
