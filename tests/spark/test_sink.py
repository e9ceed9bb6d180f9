"""The sink: rows written with df.write come back from a read, and a refused message fails the write."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.daemons import Daemon, DaemonSet
from tests.spark.conftest import create_topic

# A SparkSession and real daemons: over a minute in all (CI runs slow suites too).
pytestmark = pytest.mark.slow


def test_sink_round_trip(spark: Any, cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic = "SparkSinkRoundTrip"
    create_topic(ns, broker, topic, queues=3)
    rows = [(f"payload-{i}".encode(), f"tag{i % 2}", f"key{i}", {"n": str(i)}) for i in range(150)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys string, properties map<string,string>")
    (df.repartition(3).write.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", topic)
     .option("batchSize", "16").mode("append").save())
    back = (spark.read.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", topic).load()
            .collect())
    assert len(back) == 150
    got = sorted((bytes(r.body), r.tags, r.keys, r.properties["n"]) for r in back)
    assert got == sorted((b, t, k, p["n"]) for b, t, k, p in rows)


def test_sink_topic_column_and_string_bodies(spark: Any, cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    for t in ("SparkSinkColA", "SparkSinkColB"):
        create_topic(ns, broker, t, queues=1)
    df = spark.createDataFrame([("SparkSinkColA", "a1"), ("SparkSinkColB", "b1"), ("SparkSinkColA", "a2")],
                               "topic string, body string")
    df.write.format("rocketmq").option("namesrvAddr", ns.addr).mode("append").save()
    for t, want in (("SparkSinkColA", [b"a1", b"a2"]), ("SparkSinkColB", [b"b1"])):
        got = spark.read.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", t).load().collect()
        assert sorted(bytes(r.body) for r in got) == want


def test_sink_without_body_column_is_refused(spark: Any, cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="needs a 'body' column"):
        df.write.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", "T").mode("append").save()


def test_sink_fails_clearly_when_the_broker_refuses(spark: Any, daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "maxMessageSize=2048")
    topic = "SparkSinkRefused"
    create_topic(ns, broker, topic, queues=1)
    df = spark.createDataFrame([(b"x" * 3000,)], "body binary")
    with pytest.raises(Exception, match="message size exceeded"):
        df.write.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", topic).mode("append").save()
