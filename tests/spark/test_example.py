"""The example pipeline run exactly as its docstring says, as a user's process: per-tag window counts
reach a topic and parquet, ``--available-now`` writes the windows the data closed (the newest stays
in the checkpoint for the next run, as documented), and nothing in the environment prepares the
Spark workers (no PYSPARK_PYTHON).

The docstring's commands are run as printed, with two substitutions a test needs: the standalone
listens on free ports (so the NameServer address replaces 127.0.0.1:9876) and the windows are
2 seconds (``--window``, a documented flag) rather than 10.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq
import pytest

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.message import Message
from rocketmq_py.client.sync import BlockingProducer
from tests.integration.daemons import Daemon, _spawn
from tests.spark.conftest import ROOT, wait_route

# Real daemons and a Spark driver process of the example's own: about a minute (CI runs slow suites too).
pytestmark = pytest.mark.slow

EXAMPLE = os.path.join(ROOT, "examples", "tag_counts_pipeline.py")
WINDOW = 2.0


def _documented_commands() -> list[str]:
    with open(EXAMPLE) as f:
        doc = f.read().split('"""', 2)[1]
    return [ln.strip().split("  #", 1)[0].strip() for ln in doc.splitlines() if ln.startswith("    ")]


def _user_env() -> dict[str, str]:
    # What a user's shell has: the suite's Spark fixture exports PYSPARK_PYTHON into this process,
    # which a user running the example does not have, and which would hide the problem.
    return {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


@pytest.fixture
def standalone(tmp_path: str) -> Iterator[tuple[Daemon, str]]:
    home = os.path.join(str(tmp_path), "standalone")
    os.makedirs(home)
    first = _documented_commands()[0]
    assert first == "mqstandalone &", first
    d = _spawn("mqstandalone", ["rocketmq_py.standalone", "--port", "0", "--broker-port", "0", "--home", home],
               home, "boot success. serializeType=JSON and name server")
    try:
        yield d, next(ln for ln in d.lines if "The Name Server boot success" in ln).rsplit("address ", 1)[1].strip()
    finally:
        assert d.stop() == 0


def _run_documented(command: str, namesrv: str, extra: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command.replace("127.0.0.1:9876", namesrv))
    if argv[0] == "python":
        argv = [sys.executable, *argv[1:], "--namesrv", namesrv]
    else:
        argv[0] = os.path.join(os.path.dirname(sys.executable), argv[0])  # the console script of this install
    out = subprocess.run(argv + extra, capture_output=True, text=True, timeout=600, cwd=cwd, env=_user_env(),
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"{argv} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    return out


def _send(namesrv: str, topic: str, plan: list[tuple[int, Message]]) -> None:
    with BlockingProducer("example-test-producer", namesrv, instance_name=f"example-{time.monotonic_ns()}") as p:
        for queue_id, msg in plan:
            p.send(msg, queue=MessageQueue(topic, "broker-a", queue_id))


def _wait_past_window_of(t: float) -> None:
    """Wait (bounded) until the window holding time ``t`` has ended, so a message sent next closes it."""
    end = (t // WINDOW + 1) * WINDOW
    deadline = time.time() + WINDOW + 5
    while time.time() <= end + 0.05:
        assert time.time() < deadline
        time.sleep(0.05)  # a clock wait, bounded: windows are aligned to wall-clock multiples


def _parquet_totals(out: str) -> dict[str, int]:
    data = os.path.join(out, "data")
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(data) for f in fs if f.endswith(".parquet")]
    totals: dict[str, int] = {}
    for path in files:
        for row in pq.read_table(path).to_pylist():
            totals[row["tag"]] = totals.get(row["tag"], 0) + row["messages"]
    return totals


def _topic_totals(spark: Any, namesrv: str, topic: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for r in spark.read.format("rocketmq").option("namesrvAddr", namesrv).option("topic", topic).load().collect():
        body = json.loads(bytes(r.body))
        assert r.tags == body["tag"]
        totals[body["tag"]] = totals.get(body["tag"], 0) + body["messages"]
    return totals


def test_the_example_runs_as_its_docstring_says(standalone: tuple[Daemon, str], spark: Any, tmp_path: str) -> None:
    _, namesrv = standalone
    commands = _documented_commands()
    assert len(commands) == 4 and commands[3].startswith("python examples/tag_counts_pipeline.py")
    for command in commands[1:3]:  # the two mqadmin updateTopic lines
        _run_documented(command, namesrv, [], ROOT)
    wait_route(namesrv, "Orders", 8)
    source, sink = re.search(r"--source (\S+) --sink-topic (\S+)", commands[3]).groups()  # type: ignore[union-attr]
    assert (source, sink) == ("Orders", "OrderTagCounts")
    out = os.path.join(str(tmp_path), "tag-counts")
    pipeline = commands[3].replace("/tmp/tag-counts", out)
    run = ["--window", f"{WINDOW:g} seconds", "--available-now"]

    _send(namesrv, source, [(i % 2, Message(source, b"x" * 10, tags=("A", "B", "B")[i % 3]))
                                          for i in range(30)])
    _wait_past_window_of(time.time())
    _send(namesrv, source, [(0, Message(source, b"newer", tags="Z"))])

    _run_documented(pipeline, namesrv, run, ROOT)
    assert _parquet_totals(out) == {"A": 10, "B": 20}, "the windows the Z message closed; Z's own is still open"
    assert _topic_totals(spark, namesrv, sink) == {"A": 10, "B": 20}

