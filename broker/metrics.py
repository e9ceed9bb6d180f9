"""Broker metrics for Prometheus (``metricsPort``): read from the broker's own tables at scrape time.

Put counts per topic come from the consume queues' max offsets, consumer lag from the committed
offsets, connections from the servers' connection sets, totals from BrokerStats -- all state the
broker keeps anyway, so a scrape costs a walk of those tables and the send/pull path pays nothing.
Only what no table holds is counted as it happens, and only when metrics are on: request latency
by code (remoting.metrics), bytes put per topic (from successful sends) and messages/bytes got per
topic (by wrapping the pull processor's ``pull``).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.metrics import MetricsHttpServer, instrument_server, request_latency_histogram

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

_SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
_I32 = struct.Struct(">i")


def count_records(body: bytes) -> int:
    """Messages in a pull body: records back to back, each led by its total size."""
    count = pos = 0
    end = len(body)
    while pos + 4 <= end:
        size = _I32.unpack_from(body, pos)[0]
        if size <= 0:
            break
        pos += size
        count += 1
    return count


class _Rates:
    """Per-second rates between two scrapes (the first scrape: since the broker started)."""

    def __init__(self, started: float) -> None:
        self._last: dict[str, tuple[float, float]] = {}
        self._started = started

    def rate(self, key: str, value: float, now: float) -> float:
        then, previous = self._last.get(key, (self._started, 0.0))
        self._last[key] = (now, value)
        return max(value - previous, 0.0) / max(now - then, 1e-3)


class BrokerMetricsCollector(Collector):
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.topic_put_bytes: dict[str, int] = {}
        self.topic_get_messages: dict[str, int] = {}
        self.topic_get_bytes: dict[str, int] = {}
        self._rates = _Rates(time.monotonic())

    # -- hooks, installed only when metrics are on -------------------------------------------

    def on_send(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or response.code != ResponseCode.SUCCESS or not request.body:
            return
        ext = request.ext_fields or {}
        topic = ext.get("b") if request.code != RequestCode.SEND_MESSAGE else ext.get("topic")
        if topic is None:
            topic = ext.get("topic", "")
        self.topic_put_bytes[topic] = self.topic_put_bytes.get(topic, 0) + len(request.body)

    def on_pull(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or response.code != ResponseCode.SUCCESS or not response.body:
            return
        topic = (request.ext_fields or {}).get("topic", "")
        self.topic_get_messages[topic] = self.topic_get_messages.get(topic, 0) + count_records(response.body)
        self.topic_get_bytes[topic] = self.topic_get_bytes.get(topic, 0) + len(response.body)

    # -- scrape -------------------------------------------------------------------------------

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        b = self.broker
        cfg = b.broker_config
        base = ["cluster", "broker"]
        ids = [cfg.brokerClusterName, cfg.brokerName]
        now = time.monotonic()
        stats = b.stats
        store = b.message_store
        rate = self._rates.rate

        for name, value, doc in (("put_messages", stats.put_messages, "Messages stored"),
                                 ("put_bytes", stats.put_bytes, "Bytes stored"),
                                 ("get_messages", stats.get_messages, "Messages returned to pulls"),
                                 ("get_bytes", stats.get_bytes, "Bytes returned to pulls")):
            counter = CounterMetricFamily(f"rocketmq_broker_{name}", doc, labels=base)
            counter.add_metric(ids, value)
            yield counter
        tps = GaugeMetricFamily("rocketmq_broker_tps", "Messages per second since the previous scrape",
                                labels=[*base, "direction"])
        tps.add_metric([*ids, "put"], rate("broker_put", stats.put_messages, now))
        tps.add_metric([*ids, "get"], rate("broker_get", stats.get_messages, now))
        yield tps

        topic_labels = [*base, "topic"]
        put_msgs = CounterMetricFamily("rocketmq_topic_put_messages", "Messages stored per topic (queue max offsets)",
                                       labels=topic_labels)
        put_tps = GaugeMetricFamily("rocketmq_topic_put_tps", "Messages stored per second since the previous scrape",
                                    labels=topic_labels)
        for topic, config in b.topic_config_manager.table.items():
            queues = max(config.writeQueueNums, config.readQueueNums)
            total = sum(max(store.get_max_offset_in_queue(topic, q), 0) for q in range(queues))
            put_msgs.add_metric([*ids, topic], total)
            put_tps.add_metric([*ids, topic], rate(f"put:{topic}", total, now))
        yield put_msgs
        yield put_tps
        put_bytes = CounterMetricFamily("rocketmq_topic_put_bytes", "Message body bytes of successful sends",
                                        labels=topic_labels)
        for topic, value in self.topic_put_bytes.items():
            put_bytes.add_metric([*ids, topic], value)
        yield put_bytes
        get_msgs = CounterMetricFamily("rocketmq_topic_get_messages", "Messages returned to pulls per topic",
                                       labels=topic_labels)
        get_bytes = CounterMetricFamily("rocketmq_topic_get_bytes", "Bytes returned to pulls per topic",
                                        labels=topic_labels)
        get_tps = GaugeMetricFamily("rocketmq_topic_get_tps", "Messages pulled per second since the previous scrape",
                                    labels=topic_labels)
        for topic, value in self.topic_get_messages.items():
            get_msgs.add_metric([*ids, topic], value)
            get_bytes.add_metric([*ids, topic], self.topic_get_bytes.get(topic, 0))
            get_tps.add_metric([*ids, topic], rate(f"get:{topic}", value, now))
        yield get_msgs
        yield get_bytes
        yield get_tps

        yield from self._consumers(base, ids)
        yield from self._store(base, ids)
        yield from self._connections(base, ids)

    def _consumers(self, base: list[str], ids: list[str]) -> Iterator[GaugeMetricFamily]:
        store = self.broker.message_store
        labels = [*base, "group", "topic"]
        lag = GaugeMetricFamily("rocketmq_consumer_lag", "Messages stored but not yet committed by the group",
                                labels=labels)
        offset = GaugeMetricFamily("rocketmq_consumer_offset", "Sum of the group's committed queue offsets",
                                   labels=labels)
        for key, queues in self.broker.consumer_offset_manager.offset_table.items():
            topic, _, group = key.partition("@")
            behind = sum(max(store.get_max_offset_in_queue(topic, q) - max(off, 0), 0) for q, off in queues.items())
            lag.add_metric([*ids, group, topic], behind)
            offset.add_metric([*ids, group, topic], sum(max(off, 0) for off in queues.values()))
        yield lag
        yield offset
        online = GaugeMetricFamily("rocketmq_consumer_clients", "Consumer connections per group",
                                   labels=[*base, "group"])
        for group, info in self.broker.consumer_manager.consumer_table.items():
            online.add_metric([*ids, group], len(info.channel_info_table))
        yield online

    def _store(self, base: list[str], ids: list[str]) -> Iterator[GaugeMetricFamily]:
        store = self.broker.message_store
        ratio = GaugeMetricFamily("rocketmq_store_disk_ratio", "Used fraction of the CommitLog's disk", labels=base)
        ratio.add_metric(ids, store.disk_usage_ratio())
        yield ratio
        span = GaugeMetricFamily("rocketmq_store_commitlog_bytes", "CommitLog bytes between min and max offset",
                                 labels=base)
        span.add_metric(ids, max(store.get_max_phy_offset() - store.get_min_phy_offset(), 0))
        yield span
        used = GaugeMetricFamily("rocketmq_store_files_bytes", "Bytes of the files under storePathRootDir",
                                 labels=base)
        used.add_metric(ids, _dir_size(self.broker.store_config.storePathRootDir))
        yield used

    def _connections(self, base: list[str], ids: list[str]) -> Iterator[GaugeMetricFamily]:
        b = self.broker
        conns = GaugeMetricFamily("rocketmq_connections", "Open client connections", labels=[*base, "server"])
        conns.add_metric([*ids, "main"], len(b.remoting_server.connections))
        conns.add_metric([*ids, "fast"], len(b.fast_server.connections))
        yield conns
        producers = GaugeMetricFamily("rocketmq_producer_clients", "Producer connections per group",
                                      labels=[*base, "group"])
        for group, channels in b.producer_manager.group_channel_table.items():
            producers.add_metric([*ids, group], len(channels))
        yield producers


def _dir_size(root: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


class BrokerMetrics:
    """Wires the collector, the latency histograms and the exporter to one broker."""

    def __init__(self, broker: BrokerController, port: int, host: str,
                 registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.collector = BrokerMetricsCollector(broker)
        self.registry.register(self.collector)
        histogram = request_latency_histogram(self.registry, "rocketmq_broker")
        observers = {int(code): self.collector.on_send for code in _SEND_CODES}
        for server in (broker.remoting_server, broker.fast_server):
            instrument_server(server, histogram, observers)
        self._wrap_pull(broker)
        self.server = MetricsHttpServer(self.registry, host, port) if port >= 0 else None

    def _wrap_pull(self, broker: BrokerController) -> None:
        # Held long polls are answered through ``pull`` as well (execute_held), not through the
        # processor table, so counting here sees every message a consumer gets.
        processor = broker.pull_processor
        inner = processor.pull
        on_pull = self.collector.on_pull

        def pull(conn, request, allow_suspend):  # type: ignore[no-untyped-def]
            response = inner(conn, request, allow_suspend)
            on_pull(request, response)
            return response

        processor.pull = pull  # type: ignore[method-assign]

    async def start(self) -> None:
        if self.server is not None:
            await self.server.start()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()
