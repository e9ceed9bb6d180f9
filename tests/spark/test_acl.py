"""The connector's accessKey/secretKey options against a broker with aclEnable=true, without
Spark: the driver's TopicView, an executor's read_range and the sink's send_rows sign with the
account; without it the broker refuses them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.spark.options import OptionError, sink_options, source_options
from rocketmq_py.client.spark.partitions import QueueRange
from rocketmq_py.client.spark.reader import read_range
from rocketmq_py.client.spark.sink import send_rows
from rocketmq_py.client.spark.topic import TopicView
from tests.integration.daemons import DaemonSet
from tests.spark.conftest import wait_route

pyspark_types = pytest.importorskip("pyspark.sql.types")

TOPIC = "SparkAclTopic"
ACL = """accounts:
  - {accessKey: spark-admin, secretKey: spark-admin-secret, admin: true}
"""
ACCOUNT = {"accessKey": "spark-admin", "secretKey": "spark-admin-secret"}


def test_source_and_sink_sign_with_the_options_account(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}", "autoCreateTopicEnable=true")
    schema = pyspark_types.StructType([pyspark_types.StructField("body", pyspark_types.BinaryType())])
    rows = [{"body": f"row-{i}".encode()} for i in range(5)]
    with pytest.raises(MQClientError):
        send_rows(sink_options({"namesrvAddr": ns.addr, "topic": TOPIC}), schema, iter(rows))
    assert send_rows(sink_options({"namesrvAddr": ns.addr, "topic": TOPIC, **ACCOUNT}), schema, iter(rows)) == 5
    wait_route(ns.addr, TOPIC, 1)
    opts = source_options({"namesrvAddr": ns.addr, "topic": TOPIC, **ACCOUNT}, False)
    view = TopicView(ns.addr, TOPIC, 10.0, opts.credentials)
    try:
        queues = view.queues()
    finally:
        view.close()
    bodies = []
    for state in queues.values():
        part = QueueRange(TOPIC, state.mq.broker_name, broker.addr, state.mq.queue_id, state.min_offset,
                          state.max_offset)
        bodies += [b for batch in read_range(part, opts) for b in batch.column("body").to_pylist()]
    assert sorted(bodies) == sorted(r["body"] for r in rows)
    unsigned = source_options({"namesrvAddr": ns.addr, "topic": TOPIC}, False)
    busy = next(s for s in queues.values() if s.max_offset > s.min_offset)
    with pytest.raises(MQClientError, match="No accessKey is configured"):
        list(read_range(QueueRange(TOPIC, busy.mq.broker_name, broker.addr, busy.mq.queue_id, busy.min_offset,
                                   busy.max_offset), unsigned))
    with pytest.raises(OptionError, match="go together"):
        source_options({"namesrvAddr": ns.addr, "topic": TOPIC, "accessKey": "x"}, False)
