"""The executor's reader without Spark: windows of pulls over its own socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rocketmq_py.client.message import Message
from rocketmq_py.client.spark import reader
from rocketmq_py.client.spark.options import source_options
from rocketmq_py.client.spark.partitions import QueueRange
from rocketmq_py.client.spark.puller import BlockingPuller
from rocketmq_py.client.spark.reader import read_range
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from tests.integration.daemons import ROOT, Daemon
from tests.spark.conftest import create_topic, send

pytestmark = pytest.mark.slow


def test_short_pulls_void_the_window_sent_ahead_and_nothing_is_lost_or_doubled(cluster: tuple[Daemon, Daemon]
                                                                                ) -> None:
    """20 KB bodies: the broker answers a pull with at most 256 KB (12 records), so every window
    sent ahead assumed full pulls and asked for the wrong offsets; it must be dropped."""
    ns, broker = cluster
    topic = "SparkReaderShortPulls"
    create_topic(ns, broker, topic, queues=1)
    bodies = [os.urandom(20_000) for _ in range(150)]
    send(ns, topic, [(0, Message(topic, b)) for b in bodies])
    opts = source_options({"namesrvAddr": ns.addr, "topic": topic, "pullsInFlight": "4", "rowsPerBatch": "50"},
                          False)
    batches = list(read_range(QueueRange(topic, "broker-a", broker.addr, 0, 3, 140), opts))
    offsets = [o for b in batches for o in b.column("queueOffset").to_pylist()]
    assert offsets == list(range(3, 140))
    assert [body for b in batches for body in b.column("body").to_pylist()] == bodies[3:140]
    assert max(b.num_rows for b in batches) < 50 + 32


def test_windows_follow_what_a_pull_returns_so_short_pulls_void_no_more_than_the_first_windows(
        cluster: tuple[Daemon, Daemon], monkeypatch: pytest.MonkeyPatch) -> None:
    """20 KB bodies come 12 to a pull: once one came back short, a window asks 12 offsets apart,
    so its pulls all count; only the first window and the one sent ahead of it are void past their
    first pull. Before, every window was, and the broker read each void pull all the same."""
    ns, broker = cluster
    topic = "SparkReaderStride"
    create_topic(ns, broker, topic, queues=1)
    bodies = [os.urandom(20_000) for _ in range(300)]
    send(ns, topic, [(0, Message(topic, b)) for b in bodies])
    sent: list[int] = []
    plain_send = BlockingPuller.send

    def counting_send(self: BlockingPuller, requests: list[RemotingCommand]) -> list[int]:
        sent.extend(int((r.ext_fields or {})["queueOffset"]) for r in requests)
        return plain_send(self, requests)

    monkeypatch.setattr(BlockingPuller, "send", counting_send)
    opts = source_options({"namesrvAddr": ns.addr, "topic": topic}, False)
    assert opts.pulls_in_flight == 8
    batches = list(read_range(QueueRange(topic, "broker-a", broker.addr, 0, 5, 290), opts))
    assert [body for b in batches for body in b.column("body").to_pylist()] == bodies[5:290]
    useful = -(-285 // 12)
    assert useful <= len(sent) <= useful + 2 * 8 + 1, sent


def test_a_batch_ends_at_its_byte_budget_before_its_row_count(cluster: tuple[Daemon, Daemon],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Big bodies: a batch is handed over once its bodies pass BATCH_BYTES (within one pull's
    answer, at most 256 KB), not after rowsPerBatch rows; nothing is lost or doubled across them."""
    ns, broker = cluster
    topic = "SparkReaderByteBudget"
    create_topic(ns, broker, topic, queues=1)
    bodies = [os.urandom(20_000) for _ in range(100)]
    send(ns, topic, [(0, Message(topic, b)) for b in bodies])
    monkeypatch.setattr(reader, "BATCH_BYTES", 150_000)
    opts = source_options({"namesrvAddr": ns.addr, "topic": topic, "rowsPerBatch": "8192"}, False)
    batches = list(read_range(QueueRange(topic, "broker-a", broker.addr, 0, 0, 100), opts))
    assert [body for b in batches for body in b.column("body").to_pylist()] == bodies
    assert len(batches) >= 100 * 20_000 // (150_000 + 256 * 1024)
    assert all(sum(map(len, b.column("body").to_pylist())) < 150_000 + 256 * 1024 for b in batches)


def test_puller_times_out_and_reports_a_closed_connection(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    create_topic(ns, broker, "SparkReaderHeld", queues=1)
    puller = BlockingPuller(broker.addr, 0.3)
    try:
        # A long-polling pull of an empty queue: the broker holds it past the puller's timeout.
        hold = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "reader-test", "topic": "SparkReaderHeld", "queueId": "0", "queueOffset": "0",
            "maxMsgNums": "1", "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "5000",
            "subVersion": "0", "subscription": "*", "expressionType": "TAG"})
        with pytest.raises(RemotingTimeoutError):
            puller.receive(puller.send([hold]))
    finally:
        puller.close()
    with pytest.raises(RemotingConnectError):
        BlockingPuller("127.0.0.1:1", 1.0)


def test_the_sources_read_leaves_the_workers_heap_out_of_collections_and_reads_the_same(
        cluster: tuple[Daemon, Daemon]) -> None:
    """In a fresh interpreter (as a Spark worker is), the data source's first ``read`` freezes
    what the process held, so a full collection after a task no longer walks it; the rows read
    are the ones ``read_range`` gives, and a process that only calls ``read_range`` is left as is."""
    ns, broker = cluster
    topic = "SparkReaderFrozenHeap"
    create_topic(ns, broker, topic, queues=1)
    bodies = [os.urandom(100) for _ in range(40)]
    send(ns, topic, [(0, Message(topic, b)) for b in bodies])
    script = textwrap.dedent(f"""
        import gc, json
        from rocketmq_py.client.spark.options import source_options
        from rocketmq_py.client.spark.partitions import QueueRange
        from rocketmq_py.client.spark.reader import read_range
        from rocketmq_py.client.spark.source import RocketMQBatchReader
        opts = source_options({{"namesrvAddr": {ns.addr!r}, "topic": {topic!r}}}, False)
        part = QueueRange({topic!r}, "broker-a", {broker.addr!r}, 0, 0, 40)
        plain = [b for batch in read_range(part, opts) for b in batch.column("body").to_pylist()]
        gc.collect()  # what is alive now, as the freeze (which collects first) counts it
        before = gc.get_freeze_count(), len(gc.get_objects())
        read = [b.hex() for batch in RocketMQBatchReader(opts).read(part) for b in batch.column("body").to_pylist()]
        print(json.dumps({{"before": before, "frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects()),
                          "plain": [b.hex() for b in plain], "read": read}}))
        """)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"][0] == 0  # read_range alone froze nothing
    # What was alive is frozen, less what the freeze's own collection first freed (a read's garbage).
    assert got["frozen"] >= 0.95 * got["before"][1] and got["before"][1] > 10_000
    assert got["tracked"] < got["before"][1] // 10
    assert got["read"] == got["plain"] == [b.hex() for b in bodies]


@pytest.mark.parametrize("options", [{}, {"subExpression": "TagA || TagB", "consumerGroup": "mirror",
                                          "pullBatchSize": "7"}])
def test_pull_requests_are_the_typed_headers_request_with_a_fresh_opaque(options: dict[str, str]) -> None:
    opts = source_options({"namesrvAddr": "127.0.0.1:9876", "topic": "T", **options}, streaming=False)
    part = QueueRange("T", "broker-a", "127.0.0.1:10911", 5, 1_000, 1_040)
    requests = reader.PullRequests(part, opts)
    made = [requests(offset) for offset in (1_000, 1_007, 1_032, 1_035, 1_039)]
    for offset, request in zip((1_000, 1_007, 1_032, 1_035, 1_039), made, strict=True):
        typed = reader._request(part, opts, offset)
        assert request.ext_fields == typed.ext_fields  # maxMsgNums cut by the range's end as well
        assert (request.code, request.flag, request.language, request.version, request.body) == (
            typed.code, typed.flag, typed.language, typed.version, typed.body)
    assert len({r.opaque for r in made}) == len(made)
    assert made[-1].ext_fields is not None and made[-1].ext_fields["maxMsgNums"] == "1"
    assert made[0].ext_fields is not made[1].ext_fields  # a signature written into one stays there
