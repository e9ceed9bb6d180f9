"""The example pipeline of examples/ runs end to end: per-tag window counts reach a topic and parquet."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from typing import Any

import pytest

from rocketmq_py.client.message import Message
from tests.integration.daemons import Daemon
from tests.spark.conftest import ROOT, create_topic, send

# A SparkSession and real daemons: over a minute in all (CI runs slow suites too).
pytestmark = pytest.mark.slow


def test_tag_counts_pipeline(spark: Any, cluster: tuple[Daemon, Daemon], tmp_path: str) -> None:
    ns, broker = cluster
    create_topic(ns, broker, "ExampleOrders", queues=2)
    create_topic(ns, broker, "ExampleTagCounts", queues=1)
    sent = send(ns, "ExampleOrders", [(i % 2, Message("ExampleOrders", b"x" * 10, tags=("A", "B", "B")[i % 3]))
                                      for i in range(30)])
    # One late message moves the watermark past the first window, so that window closes.
    first_store = time.time()
    deadline = first_store + 10
    while time.time() < first_store + 1.5 and time.time() < deadline:
        time.sleep(0.1)  # the window below is 1 second; wait (bounded) until it is over
    send(ns, "ExampleOrders", [(0, Message("ExampleOrders", b"late", tags="Z"))])
    spec = importlib.util.spec_from_file_location("tag_counts_pipeline",
                                                  os.path.join(ROOT, "examples", "tag_counts_pipeline.py"))
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = os.path.join(tmp_path, "counts")
    example.main(["--namesrv", ns.addr, "--source", "ExampleOrders", "--sink-topic", "ExampleTagCounts",
                  "--out", out, "--window", "1 second", "--available-now"], spark=spark)
    parquet = spark.read.parquet(os.path.join(out, "data")).collect()
    totals: dict[str, int] = {}
    for r in parquet:
        totals[r.tag] = totals.get(r.tag, 0) + r.messages
    assert totals == {"A": 10, "B": 20}, "the 30 messages of the closed windows, per tag"
    assert len(sent) == 30
    topic_rows = (spark.read.format("rocketmq").option("namesrvAddr", ns.addr).option("topic", "ExampleTagCounts")
                  .load().collect())
    from_topic: dict[str, int] = {}
    for r in topic_rows:
        body = json.loads(bytes(r.body))
        assert r.tags == body["tag"]
        from_topic[body["tag"]] = from_topic.get(body["tag"], 0) + body["messages"]
    assert from_topic == totals
