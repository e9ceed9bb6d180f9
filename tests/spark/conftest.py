"""One local[2] SparkSession for the whole Spark suite; the daemons come from the shared
fixtures of tests/conftest.py (``cluster``: one NameServer and broker per module).

A SparkSession costs seconds to start, so the suite shares one (the issue asks for one per test
session); tests use their own topics. Tests that need a broker with special settings (retention,
size limits) start their own through ``daemons``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.message import Message, SendResult
from rocketmq_py.client.sync import BlockingProducer, run_sync
from tests.integration.daemons import ROOT, Daemon, DaemonSet

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
pytest.importorskip("pyarrow", reason="the spark extra is not installed")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import rocketmq_py.client.spark

    session = (SparkSession.builder.master("local[2]").appName("rocketmq-py-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    rocketmq_py.client.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


async def _create(namesrv: str, topic: str, broker_addr: str, queues: int) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, broker_addr=broker_addr, read_queue_nums=queues, write_queue_nums=queues)


def create_topic(ns: Daemon, broker: Daemon, topic: str, queues: int = 4) -> None:
    """Create ``topic`` and wait (bounded) until the NameServer routes it."""
    run_sync(_create(ns.addr, topic, broker.addr, queues))
    wait_route(ns.addr, topic, queues)


def wait_route(namesrv: str, topic: str, queues: int, timeout: float = 30.0) -> None:
    import time

    async def count() -> int:
        async with Admin(namesrv) as admin:
            try:
                route = await admin.examine_topic_route_info(topic)
            except Exception:
                return 0
            return sum(qd.readQueueNums for qd in route.queueDatas)

    deadline = time.monotonic() + timeout
    while run_sync(count()) < queues:
        assert time.monotonic() < deadline, f"topic {topic} not routed with {queues} queues in {timeout}s"
        time.sleep(0.1)  # polling interval of a bounded wait


def send(ns: Daemon, topic: str, plan: list[tuple[int, Message]], broker_name: str = "broker-a") -> list[SendResult]:
    """Send each (queueId, message) to exactly that queue; returns the results in order."""
    with BlockingProducer("spark-test-producer", ns.addr, instance_name=f"spark-test-{topic}") as p:
        return [p.send(m, queue=MessageQueue(topic, broker_name, q)) for q, m in plan]


def stats(ns: Daemon, topic: str) -> dict[MessageQueue, Any]:
    async def run() -> dict[MessageQueue, Any]:
        async with Admin(ns.addr) as admin:
            return await admin.examine_topic_stats(topic)
    return run_sync(run())


__all__ = ["ROOT", "DaemonSet", "create_topic", "send", "stats", "wait_route"]
