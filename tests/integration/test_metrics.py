"""Prometheus metrics of a real broker and NameServer under RocketMQ 5's names, scraped over HTTP
while clients produce and consume: rates computed from two scrapes as Prometheus computes them,
two scrapers reading the same numbers, consumer lag in messages and in time, DLQ sends."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, Counter

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.common.metrics import MetricsHttpServer
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from tests.integration.broker_client import pull_request, send_request
from tests.integration.daemons import DaemonSet
from tests.integration.scrape import Samples, metrics_addr, scrape_async
from tests.waiting import poll_count

BODY = b"m" * 100
NODE = {"cluster", "node_type", "node_id"}
# RocketMQ 5.3's broker metrics as its OpenTelemetry Prometheus exporter names them (unit suffix
# appended, ``_total`` on counters), each with the labels its BrokerMetricsManager,
# DefaultStoreMetricsManager and RemotingMetricsManager put on it (docs/metrics.md).
ROCKETMQ5_BROKER = {
    "rocketmq_messages_in_total": NODE | {"topic", "message_type", "is_system"},
    "rocketmq_throughput_in_total": NODE | {"topic", "message_type", "is_system"},
    "rocketmq_messages_out_total": NODE | {"topic", "consumer_group", "is_system"},
    "rocketmq_throughput_out_total": NODE | {"topic", "consumer_group", "is_system"},
    "rocketmq_message_size_bucket": NODE | {"topic", "message_type", "is_system", "le"},
    "rocketmq_rpc_latency_milliseconds_bucket": NODE | {"protocol_type", "request_code", "response_code",
                                                       "is_long_polling", "result", "le"},
    "rocketmq_consumer_lag_messages": NODE | {"topic", "consumer_group", "is_retry", "is_system"},
    "rocketmq_consumer_lag_latency_milliseconds": NODE | {"topic", "consumer_group", "is_retry", "is_system"},
    "rocketmq_consumer_inflight_messages": NODE | {"topic", "consumer_group", "is_retry", "is_system"},
    "rocketmq_consumer_ready_messages": NODE | {"topic", "consumer_group", "is_retry", "is_system"},
    "rocketmq_consumer_queueing_latency_milliseconds": NODE | {"topic", "consumer_group", "is_retry", "is_system"},
    "rocketmq_producer_connections": NODE | {"language", "version", "protocol_type"},
    "rocketmq_consumer_connections": NODE | {"consumer_group", "language", "version", "consume_mode",
                                             "protocol_type", "is_system"},
    "rocketmq_storage_size_bytes": NODE | {"storage_type", "storage_medium"},
    "rocketmq_storage_flush_behind_bytes": NODE | {"storage_type", "storage_medium"},
    "rocketmq_storage_dispatch_behind_bytes": NODE | {"storage_type", "storage_medium"},
    "rocketmq_storage_message_reserve_time_milliseconds": NODE | {"storage_type", "storage_medium"},
    "rocketmq_topic_number": NODE,
    "rocketmq_consumer_group_number": NODE,
    "rocketmq_broker_permission": NODE,
    "rocketmq_processor_watermark": NODE | {"processor"},
}


def _labels(samples: Samples, name: str) -> set[str]:
    found = [set(lbl) for n, lbl, _ in samples.rows if n == name]
    assert found, f"{name} not exported"
    return set.union(*found)


async def _load(producer: Producer, topic: str, acked: list[int], stop: asyncio.Event, limit: int) -> None:
    """Steady sends one after another, bounded in count; ``acked[0]`` counts the answered ones."""
    while not stop.is_set() and acked[0] < limit:
        await producer.send(Message(topic, BODY))
        acked[0] += 1


async def _wait(condition, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_counters_give_prometheus_rates_and_every_scraper_reads_the_same(daemons: DaemonSet) -> None:
    ns = daemons.namesrv("metricsPort=0")
    broker = daemons.broker(ns.addr, "metricsPort=0")
    addr = metrics_addr(broker)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("RateTopic", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    labels = {"topic": "RateTopic", "cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a",
              "message_type": "normal", "is_system": "false"}
    async with Producer("rate_producer", ns.addr) as producer:
        acked, stop = [0], asyncio.Event()
        load = asyncio.create_task(_load(producer, "RateTopic", acked, stop, 20_000))
        try:
            await _wait(lambda: acked[0] >= 50)
            before_first = acked[0]
            t1 = time.time()
            first = await scrape_async(addr)
            after_first = acked[0]
            await _wait(lambda: acked[0] >= after_first + 300)
            before_second = acked[0]
            t2 = time.time()
            second = await scrape_async(addr)
            after_second = acked[0]
        finally:
            stop.set()
            await load
        # Counted in: every acknowledged send by the scrape's end, none not yet sent at its start.
        in1 = first.one("rocketmq_messages_in_total", **labels)
        in2 = second.one("rocketmq_messages_in_total", **labels)
        assert before_first <= in1 <= after_first + 1
        assert before_second <= in2 <= after_second + 1
        # Prometheus's rate(): the increase over the time between the two samples.
        rate = (in2 - in1) / (t2 - t1)
        assert (before_second - after_first - 1) / (t2 - t1) <= rate <= (after_second + 1 - before_first) / (t2 - t1)
        assert rate > 0
        assert second.one("rocketmq_throughput_in_total", **labels) == in2 * len(BODY)
        sends = {"request_code": "send_message_v2", "response_code": "success", "result": "success"}
        count2 = second.one("rocketmq_rpc_latency_milliseconds_count", **sends)
        assert count2 - first.one("rocketmq_rpc_latency_milliseconds_count", **sends) == in2 - in1
        assert second.one("rocketmq_message_size_count", **labels) == in2
        assert second.one("rocketmq_message_size_bucket", le="1024.0", **labels) == in2  # 100-byte bodies

    # At rest, two scrapers (and a third scrape after them) read exactly the same series.
    a, b = await asyncio.gather(scrape_async(addr), scrape_async(addr))
    c = await scrape_async(addr)

    def stable(s: Samples) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {(n, tuple(sorted(lbl.items()))): v for n, lbl, v in s.rows
                if n.startswith("rocketmq_") and "latency" not in n and "reserve_time" not in n
                and "storage_size" not in n and "watermark" not in n}
    assert stable(a) == stable(b) == stable(c)
    assert a.one("rocketmq_messages_in_total", **labels) == acked[0]

    # Only the request codes served have latency series (no bucket rows for codes never used).
    codes = {lbl["request_code"] for n, lbl, _ in c.rows if n == "rocketmq_rpc_latency_milliseconds_count"}
    assert "send_message_v2" in codes and "get_broker_runtime_info" not in codes
    assert len(codes) < 15, codes
    names = await scrape_async(metrics_addr(ns))
    ns_codes = {lbl["request_code"] for n, lbl, _ in names.rows if n == "rocketmq_rpc_latency_milliseconds_count"}
    assert {"register_broker", "get_routeinfo_by_topic"} <= ns_codes and "pull_message" not in ns_codes
    assert names.one("rocketmq_namesrv_brokers", broker_cluster="DefaultCluster", node_type="nameserver") == 1
    assert names.one("rocketmq_namesrv_topics") >= 1
    assert names.one("rocketmq_namesrv_connections") >= 1
    assert names.one("process_resident_memory_bytes") > 0
    assert c.one("process_cpu_seconds_total") > 0


async def test_names_labels_lag_and_dlq_as_rocketmq5(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "metricsPort=0")
    addr = metrics_addr(broker)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("LagTopic", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    sent_at = time.time() * 1000
    async with Producer("lag_producer", ns.addr) as producer:
        for _ in range(20):
            await producer.send(Message("LagTopic", BODY))
        consumer = LitePullConsumer("lag_group", ns.addr, auto_commit=False, pull_batch_size=2,
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("LagTopic")
        async with consumer:
            got = await poll_count(consumer, 4, 20)
            await consumer.commit()
            committed = sum(consumer.committed_offsets().values())
            assert 0 < committed < 20
            s = await scrape_async(addr)
            scraped_at = time.time() * 1000
            group = {"consumer_group": "lag_group", "topic": "LagTopic", "is_retry": "false", "is_system": "false"}
            lag = s.one("rocketmq_consumer_lag_messages", **group)
            assert lag == 20 - committed
            # The oldest uncommitted message was stored after ``sent_at``: lag in time is at most
            # the time since then, and more than 0 while messages wait.
            assert 0 < s.one("rocketmq_consumer_lag_latency_milliseconds", **group) <= scraped_at - sent_at + 1000
            inflight = s.one("rocketmq_consumer_inflight_messages", **group)
            ready = s.one("rocketmq_consumer_ready_messages", **group)
            assert inflight >= 0 and ready >= 0 and inflight + ready == lag
            assert s.one("rocketmq_messages_out_total", topic="LagTopic", consumer_group="lag_group") >= got
            assert s.one("rocketmq_throughput_out_total", topic="LagTopic", consumer_group="lag_group") > got * 100
            assert s.one("rocketmq_consumer_connections", consumer_group="lag_group", consume_mode="pull",
                          language="python") == 1
            assert sum(s.get("rocketmq_producer_connections", language="python")) >= 1
            connected = ROCKETMQ5_BROKER["rocketmq_consumer_connections"]
            assert _labels(s, "rocketmq_consumer_connections") == connected
            assert s.one("rocketmq_topic_number") >= 1
            assert s.one("rocketmq_broker_permission") == 6
            assert s.one("rocketmq_storage_size_bytes") > 0
            assert s.one("rocketmq_storage_dispatch_behind_bytes") == 0
            assert s.one("rocketmq_storage_flush_behind_bytes") >= 0
            assert 0 < s.one("rocketmq_storage_message_reserve_time_milliseconds") <= scraped_at - sent_at + 1000

            # Every remaining message consumed and committed: the lag falls to 0 in both units.
            deadline = time.monotonic() + 20
            while committed < 20 and time.monotonic() < deadline:
                await consumer.poll(0.5)
                await consumer.commit()
                committed = sum(consumer.committed_offsets().values())
            done = await scrape_async(addr)
            assert done.one("rocketmq_consumer_lag_messages", **group) == 0
            assert done.one("rocketmq_consumer_lag_latency_milliseconds", **group) == 0


        # A message sent straight to a retry topic past its group's max reconsume times goes to
        # the DLQ and is counted there (SendMessageProcessor's DLQ path).
        # A pull of a queue at its end, held by the broker until its suspend time ends: a
        # long-polling pull in rpc latency, timed from arrival to answer.
        client = RemotingClient()
        try:
            queue_end = int((await client.invoke(broker.addr, RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": "LagTopic", "queueId": "0"}), 10)).ext_fields["offset"])
            held = await client.invoke(broker.addr, pull_request("lag_group", "LagTopic", 0, queue_end,
                                                                 suspend_ms=300), 10)
            assert held.code == ResponseCode.PULL_NOT_FOUND
        finally:
            await client.close()
        polled = await scrape_async(addr)
        assert polled.one("rocketmq_rpc_latency_milliseconds_count", request_code="pull_message",
                          response_code="pull_not_found", is_long_polling="true") >= 1
        assert polled.one("rocketmq_rpc_latency_milliseconds_bucket", request_code="pull_message",
                          response_code="pull_not_found", is_long_polling="true", le="100.0") == 0

        request = send_request("%RETRY%lag_group", b"to dlq", group="lag_producer")
        assert request.ext_fields is not None
        request.ext_fields["j"] = "99"  # reconsumeTimes
        client = RemotingClient()
        try:
            response = await client.invoke(broker.addr, request, 10)
            assert response.code == ResponseCode.SUCCESS, response.remark
        finally:
            await client.close()
        s = await scrape_async(addr)
        assert s.one("rocketmq_send_to_dlq_messages_total", consumer_group="lag_producer",
                     topic="%RETRY%lag_group") == 1
        for name, expected in ROCKETMQ5_BROKER.items():
            if name != "rocketmq_consumer_connections":  # its consumer has left; checked above
                assert _labels(s, name) == expected, name


async def test_metrics_http_server_answers_get_only() -> None:
    registry = CollectorRegistry()
    Counter("probe", "a probe", registry=registry).inc(3)
    server = MetricsHttpServer(registry, "127.0.0.1", 0)
    await server.start()
    try:
        samples = await scrape_async(server.address)
        assert samples.one("probe_total") == 3
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), 10)
        assert status.startswith(b"HTTP/1.1 405")
        writer.close()
        await writer.wait_closed()
    finally:
        await server.close()


def test_metrics_are_off_by_default(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    for daemon in (ns, broker):
        assert not any("metrics exporter" in line for line in daemon.lines), daemon.lines
