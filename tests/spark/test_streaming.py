"""Streaming reads: checkpoint restart with no loss and no duplicates, admission control,
consumer-group progress mirroring, new queues, and failOnDataLoss both ways."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.message import Message
from rocketmq_py.client.sync import run_sync
from tests.integration.daemons import Daemon, DaemonSet
from tests.spark.conftest import create_topic, send, stats

# A SparkSession and real daemons: over a minute in all (CI runs slow suites too).
pytestmark = pytest.mark.slow


def _stream(spark: Any, ns: Daemon, topic: str, **options: str) -> Any:
    r = (spark.readStream.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", topic)
         .option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _run_available_now(df: Any, out: str, checkpoint: str) -> Any:
    q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert not q.isActive, "availableNow query did not finish within 120 s"
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return q


def test_available_now_restart_reads_exactly_the_new_messages(spark: Any, cluster: tuple[Daemon, Daemon],
                                                              tmp_path: str) -> None:
    ns, broker = cluster
    topic = "SparkStreamRestart"
    create_topic(ns, broker, topic, queues=3)
    first = send(ns, topic, [(i % 3, Message(topic, f"a{i}".encode())) for i in range(30)])
    out, ckpt = os.path.join(tmp_path, "out"), os.path.join(tmp_path, "ckpt")
    df = _stream(spark, ns, topic).select("msgId", "queueId", "queueOffset", "body")
    _run_available_now(df, out, ckpt)
    rows = spark.read.parquet(out).collect()
    assert sorted(r.msgId for r in rows) == sorted(r.msg_id for r in first)

    second = send(ns, topic, [(i % 3, Message(topic, f"b{i}".encode())) for i in range(21)])
    _run_available_now(_stream(spark, ns, topic).select("msgId", "queueId", "queueOffset", "body"), out, ckpt)
    rows = spark.read.parquet(out).collect()
    ids = [r.msgId for r in rows]
    assert len(ids) == len(set(ids)) == 51, "no duplicates after the restart"
    assert set(ids) == {r.msg_id for r in first + second}, "no loss after the restart"


def test_max_offsets_per_trigger_caps_batches(spark: Any, cluster: tuple[Daemon, Daemon], tmp_path: str) -> None:
    ns, broker = cluster
    topic = "SparkStreamCapped"
    create_topic(ns, broker, topic, queues=3)
    send(ns, topic, [(i % 3, Message(topic, str(i).encode())) for i in range(40)])
    q = _run_available_now(_stream(spark, ns, topic, maxOffsetsPerTrigger="7").select("body"),
                           os.path.join(tmp_path, "out"), os.path.join(tmp_path, "ckpt"))
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 40
    assert max(sizes) <= 7 and len(sizes) >= 6, sizes


def test_consumer_group_mirrors_progress(spark: Any, cluster: tuple[Daemon, Daemon], tmp_path: str) -> None:
    ns, broker = cluster
    topic, group = "SparkStreamMirror", "spark-mirror-group"
    create_topic(ns, broker, topic, queues=2)
    send(ns, topic, [(i % 2, Message(topic, str(i).encode())) for i in range(25)])
    df = _stream(spark, ns, topic, consumerGroup=group, maxOffsetsPerTrigger="10").select("body")
    _run_available_now(df, os.path.join(tmp_path, "out"), os.path.join(tmp_path, "ckpt"))

    async def progress() -> dict[Any, Any]:
        async with Admin(ns.addr) as admin:
            return await admin.examine_consume_stats(group, topic)

    def mirrored() -> dict[int, tuple[int, int]]:
        return {mq.queue_id: (w.consumer_offset, w.broker_offset) for mq, w in run_sync(progress()).items()}

    # The last batch's end is mirrored when the query stops, which Spark does as the query ends.
    deadline = time.monotonic() + 20
    while mirrored() != {0: (13, 13), 1: (12, 12)} and time.monotonic() < deadline:
        time.sleep(0.2)  # polling interval of a bounded wait
    assert mirrored() == {0: (13, 13), 1: (12, 12)}


def test_new_queues_are_picked_up(spark: Any, cluster: tuple[Daemon, Daemon], tmp_path: str) -> None:
    ns, broker = cluster
    topic = "SparkStreamGrow"
    create_topic(ns, broker, topic, queues=1)
    send(ns, topic, [(0, Message(topic, f"q0-{i}".encode())) for i in range(5)])
    out, ckpt = os.path.join(tmp_path, "out"), os.path.join(tmp_path, "ckpt")
    _run_available_now(_stream(spark, ns, topic).select("body"), out, ckpt)
    create_topic(ns, broker, topic, queues=3)  # the route grows to three queues
    send(ns, topic, [(q, Message(topic, f"q{q}-{i}".encode())) for q in range(3) for i in range(5, 8)])
    _run_available_now(_stream(spark, ns, topic).select("body"), out, ckpt)
    got = sorted(bytes(r.body).decode() for r in spark.read.parquet(out).collect())
    assert got == sorted([f"q0-{i}" for i in range(8)] + [f"q{q}-{i}" for q in (1, 2) for i in range(5, 8)])


def _retention_broker(daemons: DaemonSet) -> tuple[Daemon, Daemon]:
    ns = daemons.namesrv()
    every_hour = ";".join(f"{h:02d}" for h in range(24))
    broker = daemons.broker(ns.addr, "mappedFileSizeCommitLog=65536", "mappedFileSizeConsumeQueue=2000",
                            "fileReservedTime=0", f"deleteWhen={every_hour}", "cleanResourceInterval=200")
    return ns, broker


def _lose_the_head(ns: Daemon, broker: Daemon, topic: str) -> int:
    """Send enough to roll several CommitLog files, then wait (bounded) for retention to delete
    the old ones: returns the queue's new min offset (> 0)."""
    create_topic(ns, broker, topic, queues=1)
    send(ns, topic, [(0, Message(topic, os.urandom(1000))) for _ in range(300)])
    deadline = time.monotonic() + 60
    while True:
        low = next(iter(stats(ns, topic).values())).min_offset
        if low > 0:
            return low
        assert time.monotonic() < deadline, "retention did not delete the old CommitLog files within 60 s"
        time.sleep(0.2)  # polling interval of a bounded wait


def test_fail_on_data_loss_true_fails_clearly(spark: Any, daemons: DaemonSet, tmp_path: str) -> None:
    ns, broker = _retention_broker(daemons)
    topic = "SparkStreamLossFail"
    _lose_the_head(ns, broker, topic)
    df = _stream(spark, ns, topic, startingOffsets=json.dumps({"broker-a:0": 0})).select("body")
    with pytest.raises(Exception, match="failOnDataLoss"):
        _run_available_now(df, os.path.join(tmp_path, "out"), os.path.join(tmp_path, "ckpt"))


def test_fail_on_data_loss_false_skips_ahead(spark: Any, daemons: DaemonSet, tmp_path: str) -> None:
    ns, broker = _retention_broker(daemons)
    topic = "SparkStreamLossSkip"
    low = _lose_the_head(ns, broker, topic)
    df = _stream(spark, ns, topic, startingOffsets=json.dumps({"broker-a:0": 0}),
                 failOnDataLoss="false").select("queueOffset")
    out = os.path.join(tmp_path, "out")
    _run_available_now(df, out, os.path.join(tmp_path, "ckpt"))
    offsets = sorted(r.queueOffset for r in spark.read.parquet(out).collect())
    assert offsets and offsets[0] >= low and offsets[-1] == 299
    assert offsets == list(range(offsets[0], 300)), "what is left is read without gaps"
