"""Prometheus metrics of a real broker and NameServer, scraped over HTTP while clients produce and
consume: per-topic TPS and bytes, consumer lag, store usage, connections, latency by request code."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, Counter

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.remoting.metrics import MetricsHttpServer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from tests.integration.daemons import DaemonSet
from tests.integration.scrape import metrics_addr, scrape_async

BODY = b"m" * 100


async def test_broker_and_namesrv_metrics_during_produce_and_consume(daemons: DaemonSet) -> None:
    ns = daemons.namesrv("metricsPort=0")
    broker = daemons.broker(ns.addr, "metricsPort=0")
    broker_metrics, ns_metrics = metrics_addr(broker), metrics_addr(ns)

    async with Admin(ns.addr) as admin:
        await admin.create_topic("MetTopic", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    async with Producer("met_producer", ns.addr) as producer:
        for _ in range(20):
            await producer.send(Message("MetTopic", BODY))
        during = await scrape_async(broker_metrics)
        labels = {"topic": "MetTopic", "broker": "broker-a", "cluster": "DefaultCluster"}
        assert during.one("rocketmq_topic_put_messages_total", **labels) == 20
        assert during.one("rocketmq_topic_put_tps", **labels) > 0
        assert during.one("rocketmq_topic_put_bytes_total", **labels) == 20 * len(BODY)
        assert during.one("rocketmq_broker_put_messages_total") >= 20
        assert during.one("rocketmq_broker_request_latency_seconds_count", name="SEND_MESSAGE_V2") >= 20
        assert during.one("rocketmq_connections", server="main") + during.one("rocketmq_connections",
                                                                                 server="fast") >= 1
        assert during.one("rocketmq_store_commitlog_bytes") > 20 * len(BODY)
        assert 0 < during.one("rocketmq_store_disk_ratio") < 1
        assert during.one("rocketmq_store_files_bytes") > 0

    consumer = LitePullConsumer("met_group", ns.addr, auto_commit=False, pull_batch_size=2,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("MetTopic")
    async with consumer:
        got = 0
        deadline = time.monotonic() + 20
        while got < 4 and time.monotonic() < deadline:
            got += len(await consumer.poll(0.5))
        await consumer.commit()
        committed = sum(consumer.committed_offsets().values())
        assert 0 < committed < 20
        after = await scrape_async(broker_metrics)
        assert after.one("rocketmq_consumer_lag", group="met_group", topic="MetTopic") == 20 - committed
        assert after.one("rocketmq_consumer_offset", group="met_group", topic="MetTopic") == committed
        assert after.one("rocketmq_consumer_clients", group="met_group") == 1
        assert after.one("rocketmq_topic_get_messages_total", topic="MetTopic") >= got
        assert after.one("rocketmq_topic_get_bytes_total", topic="MetTopic") > got * len(BODY)
        assert after.one("rocketmq_topic_get_tps", topic="MetTopic") > 0
        assert after.one("rocketmq_broker_request_latency_seconds_count", name="PULL_MESSAGE") >= 1

    names = await scrape_async(ns_metrics)
    assert names.one("rocketmq_namesrv_brokers", cluster="DefaultCluster") == 1
    assert names.one("rocketmq_namesrv_topics") >= 1
    assert names.one("rocketmq_namesrv_request_latency_seconds_count", name="REGISTER_BROKER") >= 1
    assert names.one("rocketmq_namesrv_request_latency_seconds_count", name="GET_ROUTEINFO_BY_TOPIC") >= 1
    assert names.one("rocketmq_namesrv_connections") >= 1


def test_metrics_are_off_by_default(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    for daemon in (ns, broker):
        assert not any("metrics exporter" in line for line in daemon.lines), daemon.lines


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
