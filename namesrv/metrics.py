"""NameServer metrics for Prometheus (``metricsPort``): the route tables' sizes read at scrape time,
RocketMQ 5's ``rocketmq_rpc_latency`` by the codes served, and process metrics.

RocketMQ 5's NameServer exports no metrics of its own; ours carry the labels RocketMQ 5 gives
every node (``cluster``, ``node_type="nameserver"``, ``node_id``: the listen address), so one
dashboard query selects either kind of node (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from rocketmq_py.common.metrics import DaemonMetrics
from rocketmq_py.remoting.metrics import RpcLatency, RpcLatencyHook

if TYPE_CHECKING:
    from rocketmq_py.namesrv.controller import NamesrvController

NODE_LABELS = ["cluster", "node_type", "node_id"]


class NamesrvMetricsCollector(Collector):
    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller
        self.rpc_latency = RpcLatency()

    def node(self) -> list[str]:
        try:
            node_id = self.controller.address
        except RuntimeError:  # not listening yet
            node_id = ""
        return ["", "nameserver", node_id]

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        routes = self.controller.route_info_manager
        node = self.node()
        brokers = GaugeMetricFamily("rocketmq_namesrv_brokers", "Live broker addresses per cluster",
                                    labels=[*NODE_LABELS, "broker_cluster"])
        for cluster, names in routes.cluster_addr_table.items():
            addrs = [a for n in names if n in routes.broker_addr_table
                     for a in routes.broker_addr_table[n].brokerAddrs.values() if a in routes.broker_live_table]
            brokers.add_metric([*node, cluster], len(addrs))
        yield brokers
        topics = GaugeMetricFamily("rocketmq_namesrv_topics", "Topics with a route", labels=NODE_LABELS)
        topics.add_metric(node, len(routes.topic_queue_table))
        yield topics
        kv = GaugeMetricFamily("rocketmq_namesrv_kv_configs", "KV config entries per namespace",
                               labels=[*NODE_LABELS, "namespace"])
        for namespace, table in self.controller.kv_config_manager.config_table.items():
            kv.add_metric([*node, namespace], len(table))
        yield kv
        conns = GaugeMetricFamily("rocketmq_namesrv_connections", "Open connections (brokers and clients)",
                                  labels=NODE_LABELS)
        conns.add_metric(node, len(self.controller.remoting_server.connections))
        yield conns
        yield self.rpc_latency.family(NODE_LABELS, node)


class NamesrvMetrics(DaemonMetrics):
    """Wires the collector, the rpc latency histogram, process metrics and the exporter to one NameServer."""

    def __init__(self, controller: NamesrvController, port: int, host: str,
                 registry: CollectorRegistry | None = None) -> None:
        collector = NamesrvMetricsCollector(controller)
        super().__init__(collector, port, host, registry)
        controller.remoting_server.register_rpc_hook(RpcLatencyHook(collector.rpc_latency))
