"""Broker metrics for Prometheus (``metricsPort``) under RocketMQ 5's names and labels.

RocketMQ 5's broker (BrokerMetricsManager, DefaultStoreMetricsManager, RemotingMetricsManager)
exports through OpenTelemetry's Prometheus exporter, which appends the unit to a name
(``rocketmq_consumer_lag_latency`` in milliseconds is ``rocketmq_consumer_lag_latency_milliseconds``,
``rocketmq_storage_size`` in bytes ``rocketmq_storage_size_bytes``) and keeps ``_total`` on counters;
every series carries ``cluster``, ``node_type="broker"`` and ``node_id`` (the broker name). The
names, labels and units are listed in docs/metrics.md, so RocketMQ 5's dashboards read ours.

Everything is a counter, a histogram or a gauge of current state: no figure is "since the last
scrape", so any number of scrapers read the same values and Prometheus computes the rates. The
counters are kept by hooks registered only when metrics are on (a broker without ``metricsPort``
pays nothing): the send processor's SendMessageHook and the pull processor's ConsumeMessageHook
(broker/mqtrace.py), beside the servers' RPC hook for rpc latency. A successful send adds to
its topic's ``messages_in`` and ``throughput_in``, a pull to its topic and group's
``messages_out`` and ``throughput_out`` (each one dictionary add per request); the rest is read
from the broker's own tables at scrape time.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from rocketmq_py.broker.mqtrace import ConsumeMessageContext, SendMessageContext
from rocketmq_py.common.metrics import Buckets, DaemonMetrics, HistogramSeries
from rocketmq_py.common.version import version_desc
from rocketmq_py.remoting.codes import LanguageCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.metrics import RpcLatency, RpcLatencyHook
from rocketmq_py.remoting.protocol.topic_validator import is_system_topic

if TYPE_CHECKING:
    from rocketmq_py.broker.client_channel import ClientChannelInfo
    from rocketmq_py.broker.controller import BrokerController

_I32 = struct.Struct(">i")
# BrokerMetricsManager's message-size buckets: 1 KiB, 4 KiB, 512 KiB, 1, 2 and 4 MiB.
MESSAGE_SIZE_BUCKETS = (1024.0, 4096.0, 524288.0, 1048576.0, 2097152.0, 4194304.0)
NODE_LABELS = ["cluster", "node_type", "node_id"]
MAX_HELD_TIMED = 100_000
_LANGUAGES = {c.value: c.name.lower() for c in LanguageCode}
# Property markers of TopicMessageType.parseFromMessageProperty, as they appear in the
# properties string (name, 0x01, value, 0x02).
_TRANSACTION_MARK = "TRAN_MSG\x01true"
_DELAY_MARKS = ("DELAY\x01", "TIMER_DELIVER_MS\x01", "TIMER_DELAY_SEC\x01", "TIMER_DELAY_MS\x01")
_FIFO_MARK = "__SHARDINGKEY\x01"
# One scan that rules out the common message (none of the names above).
_MAYBE_TYPED = re.compile("TRAN_MSG|DELAY|TIMER_|__SHARDINGKEY")


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


def message_type(properties: str) -> str:
    """TopicMessageType's metrics value of a message from its properties string."""
    if not properties:
        return "normal"
    if _TRANSACTION_MARK in properties:
        return "transaction"
    if any(mark in properties for mark in _DELAY_MARKS):
        return "delay"
    return "fifo" if _FIFO_MARK in properties else "normal"


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith(("%RETRY%", "%DLQ%"))


def is_system_group(group: str) -> bool:
    return group.startswith("CID_RMQ_SYS_")


def _flag(value: bool) -> str:
    return "true" if value else "false"


class BrokerMetricsCollector(Collector):
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # (topic, message_type, is_system) -> [messages, bytes]
        self.messages_in: dict[tuple[str, str, str], list[int]] = {}
        # (topic, consumer_group, is_system) -> [messages, bytes]
        self.messages_out: dict[tuple[str, str, str], list[int]] = {}
        self._in_rows: dict[tuple[str, str], tuple[list[int], Buckets]] = {}
        self.message_size = HistogramSeries("rocketmq_message_size", "Incoming messages size",
                                            ["topic", "message_type", "is_system"], MESSAGE_SIZE_BUCKETS)
        # (topic, group) -> {queue id: next offset the group's last pull was answered with}
        self.pull_offsets: dict[tuple[str, str], dict[int, int]] = {}
        self.rpc_latency = RpcLatency()

    # -- hooks, installed only when metrics are on -------------------------------------------

    def on_send(self, context: SendMessageContext) -> None:
        response, body = context.response, context.request.body
        if response is None or response.code != ResponseCode.SUCCESS or not body:
            return
        topic, properties = context.topic, context.msg_props
        kind = message_type(properties) if properties and _MAYBE_TYPED.search(properties) else "normal"
        row = self._in_rows.get((topic, kind))
        if row is None:
            row = self._in_row(topic, kind)
            if row is None:
                return
        count = count_records(body) if context.batch else 1
        counts = row[0]
        counts[0] += count
        counts[1] += len(body)
        row[1].observe(len(body) / count if count > 1 else len(body))

    def _in_row(self, topic: str, kind: str) -> tuple[list[int], Buckets] | None:
        """A topic and message type's counters and size histogram, made at its first send
        (None for retry and DLQ topics, which RocketMQ 5 does not count in)."""
        if is_retry_or_dlq(topic):
            return None
        key = (topic, kind, _flag(is_system_topic(topic)))
        row = self._in_rows[(topic, kind)] = (self.messages_in.setdefault(key, [0, 0]), self.message_size.child(key))
        return row

    def on_pull(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None:
            return
        ext = request.ext_fields or {}
        topic, group = ext.get("topic", ""), ext.get("consumerGroup", "")
        answer = response.ext_fields or {}
        next_offset = answer.get("nextBeginOffset")
        if next_offset is not None:
            try:
                self.pull_offsets.setdefault((topic, group), {})[int(ext.get("queueId", "0"))] = int(next_offset)
            except ValueError:
                pass
        if response.code != ResponseCode.SUCCESS or not response.body or is_retry_or_dlq(topic):
            return
        key = (topic, group, _flag(is_system_topic(topic) or is_system_group(group)))
        counts = self.messages_out.get(key)
        if counts is None:
            counts = self.messages_out[key] = [0, 0]
        counts[0] += count_records(response.body)
        counts[1] += len(response.body)

    # -- scrape -------------------------------------------------------------------------------

    def node(self) -> list[str]:
        cfg = self.broker.broker_config
        return [cfg.brokerClusterName, "broker", cfg.brokerName]

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        b = self.broker
        node = self.node()
        yield _gauge("rocketmq_broker_permission", "Broker permission", node, [((), b.broker_config.brokerPermission)])
        yield _gauge("rocketmq_topic_number", "Active topic number", node,
                     [((), len(b.topic_config_manager.table))])
        yield _gauge("rocketmq_consumer_group_number", "Active subscription group number", node,
                     [((), len(b.subscription_group_manager.table))])
        yield _gauge("rocketmq_processor_watermark", "Request processor watermark", node,
                     [(("default",), b.remoting_server.processors.in_flight),
                      (("fast",), b.fast_server.processors.in_flight)], ["processor"])
        in_labels = ["topic", "message_type", "is_system"]
        yield _counter("rocketmq_messages_in", "Total number of incoming messages", node,
                       ((k, v[0]) for k, v in self.messages_in.items()), in_labels)
        yield _counter("rocketmq_throughput_in", "Total traffic of incoming messages", node,
                       ((k, v[1]) for k, v in self.messages_in.items()), in_labels)
        out_labels = ["topic", "consumer_group", "is_system"]
        yield _counter("rocketmq_messages_out", "Total number of outgoing messages", node,
                       ((k, v[0]) for k, v in self.messages_out.items()), out_labels)
        yield _counter("rocketmq_throughput_out", "Total traffic of outgoing messages", node,
                       ((k, v[1]) for k, v in self.messages_out.items()), out_labels)
        yield self.message_size.family(NODE_LABELS, node)
        yield _counter("rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages", node,
                       (((topic, group, _flag(is_system_topic(topic) or is_system_group(group))), n)
                        for (group, topic), n in b.stats.dlq_messages.items()),
                       ["topic", "consumer_group", "is_system"])
        yield self.rpc_latency.family(NODE_LABELS, node)
        yield from self._connections(node)
        yield from self._lag(node)
        yield from self._store(node)

    def _connections(self, node: list[str]) -> Iterator[GaugeMetricFamily]:
        b = self.broker
        producers: dict[tuple[str, ...], int] = {}
        for channels in b.producer_manager.group_channel_table.values():
            for info in channels.values():
                key = (*_client(info), "remoting")
                producers[key] = producers.get(key, 0) + 1
        yield _gauge("rocketmq_producer_connections", "Producer connections", node, producers.items(),
                     ["language", "version", "protocol_type"])
        consumers: dict[tuple[str, ...], int] = {}
        for group, group_info in b.consumer_manager.consumer_table.items():
            mode = "pull" if group_info.consume_type.value == "CONSUME_ACTIVELY" else "push"
            for channel in group_info.channel_info_table.values():
                consumer_key = (group, *_client(channel), mode, "remoting", _flag(is_system_group(group)))
                consumers[consumer_key] = consumers.get(consumer_key, 0) + 1
        yield _gauge("rocketmq_consumer_connections", "Consumer connections", node, consumers.items(),
                     ["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"])

    def _lag(self, node: list[str]) -> Iterator[GaugeMetricFamily]:
        """ConsumerLagCalculator's figures per group and topic from the committed offsets, the
        offsets the group's pulls were last answered with, and the store's max offsets."""
        store = self.broker.message_store
        now = int(time.time() * 1000)
        rows: dict[str, list[tuple[tuple[str, ...], float]]] = {
            "lag": [], "lag_ms": [], "inflight": [], "ready": [], "queueing_ms": []}
        for key, queues in self.broker.consumer_offset_manager.offset_table.items():
            topic, _, group = key.partition("@")
            if topic.startswith("%DLQ%"):
                continue
            pulled = self.pull_offsets.get((topic, group), {})
            lag = inflight = ready = 0
            oldest_unconsumed = oldest_unpulled = 0
            for queue_id, committed in queues.items():
                top = store.get_max_offset_in_queue(topic, queue_id)
                committed = max(committed, 0)
                pull = min(max(pulled.get(queue_id, committed), committed), max(top, committed))
                if top > committed:
                    lag += top - committed
                    stamp = store.get_message_store_timestamp(topic, queue_id, committed)
                    if stamp > 0 and (oldest_unconsumed == 0 or stamp < oldest_unconsumed):
                        oldest_unconsumed = stamp
                inflight += pull - committed
                if top > pull:
                    ready += top - pull
                    stamp = store.get_message_store_timestamp(topic, queue_id, pull)
                    if stamp > 0 and (oldest_unpulled == 0 or stamp < oldest_unpulled):
                        oldest_unpulled = stamp
            labels = (topic, group, _flag(topic.startswith("%RETRY%")),
                      _flag(is_system_topic(topic) or is_system_group(group)))
            rows["lag"].append((labels, lag))
            rows["lag_ms"].append((labels, now - oldest_unconsumed if oldest_unconsumed else 0))
            rows["inflight"].append((labels, inflight))
            rows["ready"].append((labels, ready))
            rows["queueing_ms"].append((labels, now - oldest_unpulled if oldest_unpulled else 0))
        names = ["topic", "consumer_group", "is_retry", "is_system"]
        yield _gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", node, rows["lag"], names)
        yield _gauge("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time", node, rows["lag_ms"], names)
        yield _gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", node, rows["inflight"],
                     names)
        yield _gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", node, rows["ready"], names)
        yield _gauge("rocketmq_consumer_queueing_latency_milliseconds", "Consumer queueing time", node,
                     rows["queueing_ms"], names)

    def _store(self, node: list[str]) -> Iterator[GaugeMetricFamily]:
        store = self.broker.message_store
        labels = ["storage_type", "storage_medium"]
        where = ("local", "disk")
        root = self.broker.store_config.storePathRootDir
        try:
            usage = shutil.disk_usage(root if os.path.isdir(root) else os.path.dirname(root) or ".")
            used = usage.total - usage.free
        except OSError:
            used = 0
        yield _gauge("rocketmq_storage_size_bytes", "Broker storage size", node, [(where, used)], labels)
        commit_log = store.commit_log.queue
        yield _gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", node,
                     [(where, max(commit_log.max_offset - commit_log.flushed_where, 0))], labels)
        yield _gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", node,
                     [(where, store.dispatch_behind_bytes())], labels)
        earliest = store.earliest_message_time()
        reserve = int(time.time() * 1000) - earliest if earliest > 0 else 0
        yield _gauge("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time", node,
                     [(where, reserve)], labels)


def _client(info: ClientChannelInfo) -> tuple[str, str]:
    return _LANGUAGES.get(info.language, str(info.language)).lower(), version_desc(info.version).lower()


def _gauge(name: str, doc: str, node: list[str], rows: Iterable[tuple[tuple[str, ...], float]],
           labels: list[str] | None = None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=[*NODE_LABELS, *(labels or [])])
    for values, value in rows:
        family.add_metric([*node, *values], value)
    return family


def _counter(name: str, doc: str, node: list[str], rows: Iterable[tuple[tuple[str, ...], float]],
             labels: list[str]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[*NODE_LABELS, *labels])
    for values, value in rows:
        family.add_metric([*node, *values], value)
    return family


class SendMetricsHook:
    """The send processor's hook for metrics: each successful send counted in."""

    def __init__(self, collector: BrokerMetricsCollector) -> None:
        self._collector = collector

    def hook_name(self) -> str:
        return "SendMetricsHook"

    def send_message_before(self, context: SendMessageContext) -> None:
        pass

    def send_message_after(self, context: SendMessageContext) -> None:
        self._collector.on_send(context)


class ConsumeMetricsHook:
    """The pull processor's hook for metrics: every message a consumer gets counted out. A pull
    the broker holds is answered by its re-run outside the processor table, so the servers' rpc
    latency hook never sees its answer: it is timed here, from its arrival to that re-run, and
    counted in rpc latency then, with is_long_polling="true"."""

    def __init__(self, collector: BrokerMetricsCollector) -> None:
        self._collector = collector
        self._held: dict[int, float] = {}

    def hook_name(self) -> str:
        return "ConsumeMetricsHook"

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        pass

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        request, response = context.request, context.response
        self._collector.on_pull(request, response)
        held = self._held
        if context.allow_suspend:
            if response is None:
                if len(held) > MAX_HELD_TIMED:  # held pulls never answered (cannot happen): bounded anyway
                    held.clear()
                held[id(request)] = context.started
        else:
            since = held.pop(id(request), None)
            if since is not None and response is not None:
                self._collector.rpc_latency.observe(request, response, (time.perf_counter() - since) * 1000.0,
                                                    long_polling=True)


class BrokerMetrics(DaemonMetrics):
    """Wires the collector, the rpc latency histogram, process metrics and the exporter to one broker."""

    def __init__(self, broker: BrokerController, port: int, host: str,
                 registry: CollectorRegistry | None = None) -> None:
        self.collector = BrokerMetricsCollector(broker)
        super().__init__(self.collector, port, host, registry)
        latency = RpcLatencyHook(self.collector.rpc_latency)
        for server in (broker.remoting_server, broker.fast_server):
            server.register_rpc_hook(latency)
        broker.send_processor.register_send_message_hook(SendMetricsHook(self.collector))
        broker.pull_processor.register_consume_message_hook(ConsumeMetricsHook(self.collector))
