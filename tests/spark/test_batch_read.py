"""Batch reads: exact offset ranges with every column, timestamps, tag filters, partitioning."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from rocketmq_py.client.message import Message
from tests.integration.daemons import Daemon
from tests.spark.conftest import create_topic, send

# A SparkSession and real daemons: over a minute in all (CI runs slow suites too).
pytestmark = pytest.mark.slow


def _reader(spark: Any, ns: Daemon, topic: str, **options: str) -> Any:
    r = spark.read.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_exact_offset_range_returns_exactly_those_messages_with_every_column(spark: Any, cluster: tuple[Daemon, Daemon]
                                                                              ) -> None:
    ns, broker = cluster
    topic = "SparkBatchExact"
    create_topic(ns, broker, topic, queues=2)
    plan = [(i % 2, Message(topic, f"body-{i}".encode(), tags=f"T{i % 3}", keys=f"k{i} x{i}",
                            properties={"color": f"c{i}"})) for i in range(40)]
    before = int(time.time() * 1000)
    results = send(ns, topic, plan)
    after = int(time.time() * 1000)
    # queue 0 holds messages 0,2,..,38 at offsets 0..19; queue 1 holds 1,3,..,39.
    df = _reader(spark, ns, topic, startingOffsets=json.dumps({"broker-a:0": 5, "broker-a:1": 0}),
                 endingOffsets=json.dumps({"broker-a:0": 9, "broker-a:1": 3}))
    assert df.schema.simpleString() == (
        "struct<topic:string,queueId:int,brokerName:string,queueOffset:bigint,msgId:string,body:binary,"
        "tags:string,keys:string,properties:map<string,string>,bornTimestamp:timestamp,"
        "storeTimestamp:timestamp,reconsumeTimes:int>")
    rows = sorted(df.collect(), key=lambda r: (r.queueId, r.queueOffset))
    expected = [(0, o) for o in range(5, 9)] + [(1, o) for o in range(0, 3)]
    assert [(r.queueId, r.queueOffset) for r in rows] == expected
    by_offset = {(res.message_queue.queue_id, res.queue_offset): (i, res) for i, res in enumerate(results)}
    for r in rows:
        i, res = by_offset[(r.queueId, r.queueOffset)]
        assert r.topic == topic and r.brokerName == "broker-a"
        assert bytes(r.body) == f"body-{i}".encode()
        assert r.tags == f"T{i % 3}" and r.keys == f"k{i} x{i}"
        assert r.msgId == res.msg_id
        assert r.properties["color"] == f"c{i}" and r.properties["TAGS"] == r.tags
        assert before <= int(r.bornTimestamp.timestamp() * 1000) <= after
        assert int(r.bornTimestamp.timestamp() * 1000) <= int(r.storeTimestamp.timestamp() * 1000) <= after + 1000
        assert r.reconsumeTimes == 0


def test_earliest_to_latest_reads_everything_and_min_partitions_splits(spark: Any, cluster: tuple[Daemon, Daemon]
                                                                       ) -> None:
    ns, broker = cluster
    topic = "SparkBatchAll"
    create_topic(ns, broker, topic, queues=3)
    send(ns, topic, [(i % 3, Message(topic, str(i).encode())) for i in range(90)])
    df = _reader(spark, ns, topic)
    assert df.rdd.getNumPartitions() == 3  # one per MessageQueue
    assert sorted(int(bytes(r.body)) for r in df.select("body").collect()) == list(range(90))
    split = _reader(spark, ns, topic, minPartitions="9")
    assert split.rdd.getNumPartitions() >= 9
    rows = split.select("queueId", "queueOffset").collect()
    assert sorted((r.queueId, r.queueOffset) for r in rows) == sorted((q, o) for q in range(3) for o in range(30))


def _pause(seconds: float) -> None:
    """Let the store clock move on (bounded): groups of messages a clear gap apart in time."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(0.02)


def test_timestamp_range(spark: Any, cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic = "SparkBatchTime"
    create_topic(ns, broker, topic, queues=2)
    for group in ("old", "mid", "new"):
        send(ns, topic, [(i % 2, Message(topic, f"{group}-{i}".encode())) for i in range(10)])
        _pause(0.5)
    everything = [(bytes(r.body).decode(), int(r.storeTimestamp.timestamp() * 1000))
                  for r in _reader(spark, ns, topic).collect()]
    # SEARCH_OFFSET_BY_TIMESTAMP answers an exact match or the nearer neighbour (Java's rule): a
    # timestamp 1 ms before a group's first message, with the previous group 0.5 s older, names
    # each queue's first message of that group.
    begin = min(ts for body, ts in everything if body.startswith("mid-")) - 1
    end = min(ts for body, ts in everything if body.startswith("new-")) - 1
    df = _reader(spark, ns, topic, startingTimestamp=str(begin), endingTimestamp=str(end))
    got = sorted(bytes(r.body).decode() for r in df.collect())
    assert got == sorted(f"mid-{i}" for i in range(10))
    assert all(begin < int(r.storeTimestamp.timestamp() * 1000) <= end for r in df.collect())


def test_tag_filter(spark: Any, cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic = "SparkBatchTags"
    create_topic(ns, broker, topic, queues=2)
    send(ns, topic, [(i % 2, Message(topic, str(i).encode(), tags=("A", "B", "C")[i % 3])) for i in range(60)])
    df = _reader(spark, ns, topic, subExpression="A || C")
    got = sorted(int(bytes(r.body)) for r in df.collect())
    assert got == [i for i in range(60) if i % 3 != 1]
    assert {r.tags for r in df.select("tags").collect()} == {"A", "C"}


def test_bad_options_fail_clearly(spark: Any, cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    with pytest.raises(Exception, match="startingOffsets must be"):
        _reader(spark, ns, "SparkBatchAll", startingOffsets="yesterday").collect()
    with pytest.raises(Exception, match="namesrvAddr is required"):
        spark.read.format("rocketmq").option("topic", "T").load().collect()
    with pytest.raises(Exception, match="names queues the topic does not have"):
        _reader(spark, ns, "SparkBatchAll", startingOffsets='{"broker-z:0": 1}').collect()
