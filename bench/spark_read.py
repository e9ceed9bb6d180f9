"""Spark batch read of a topic (into count() and into parquet) beside the SDK's lite-pull rate.

Real daemons (one NameServer, one Broker, ASYNC_FLUSH), a topic of 8 queues loaded with
``--messages`` 1 KiB messages (1,000,000 by default), then in the same run:

- the SDK: a LitePullConsumer assigned all 8 queues (32 per pull) polls until it has them all;
- Spark: ``spark.read.format("rocketmq")`` on ``local[2]`` from earliest to latest, once into
  ``count()`` and once written to parquet, after untimed warm-up reads (the Python workers,
  the JVM's JIT), as the SDK too is measured in a warm process: the first 10,000 messages per
  queue into count() and into parquet, then the whole topic twice into count(). A JVM that has
  run one small read is not warm: its JIT compiler threads still compile Spark's task
  (de)serialization, closure cleaning and generated projections as their call counts cross the
  thresholds, 1.7 us of CPU per row of the timed count() after that alone and 5.1 per row of the
  parquet write (0.7-1.2 and 1.9-2.8 after these warm-ups).

    .venv/bin/python bench/spark_read.py [--messages 1000000]

Last line: one JSON object with spark_rows_per_s (the count), spark_parquet_rows_per_s,
sdk_msgs_per_s, ratio = spark_rows_per_s / sdk_msgs_per_s (issue 27's goal: >= 0.8),
ratio_parquet = spark_parquet_rows_per_s / sdk_msgs_per_s; the CPU every process of the run
spent per message in each phase (sdk_cpu_us_per_msg: the SDK and the broker;
spark_cpu_us_per_row and spark_parquet_cpu_us_per_row: the JVM, its Python workers and the
broker) with cpu_ratio = sdk_cpu_us_per_msg / spark_cpu_us_per_row; spark_jit_cpu_us_per_row
and spark_parquet_jit_cpu_us_per_row, the part of those spent by the JVM's JIT compiler threads
(what is left of the warm-up in the timed phases); and the machine's load
averages at the end (rates mean little on a busy machine: a side running more processes takes a
larger share of it, which the CPU figures do not reward).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.message import Message
from rocketmq_py.client.producer import Producer
from rocketmq_py.common.loop import run
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from tests.integration.daemons import start_broker, start_namesrv

QUEUES = 8
TOPIC = "SparkReadBench"
BODY = os.urandom(1024)


async def load(namesrv: str, broker_addr: str, messages: int) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(TOPIC, broker_addr=broker_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    deadline = time.monotonic() + 60
    async with Admin(namesrv) as admin:
        while True:
            try:
                route = await admin.examine_topic_route_info(TOPIC)
                if sum(q.readQueueNums for q in route.queueDatas) >= QUEUES:
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("topic not routed within 60 s")
            await asyncio.sleep(0.1)  # polling interval of a bounded wait
    producer = Producer("spark-bench-producer", namesrv, instance_name="spark-bench")
    await producer.start()
    try:
        per_queue = messages // QUEUES

        async def fill(queue_id: int, count: int) -> None:
            mq = MessageQueue(TOPIC, "broker-a", queue_id)
            for start in range(0, count, 32):
                n = min(32, count - start)
                await producer.send_batch([Message(TOPIC, BODY) for _ in range(n)], queue=mq, timeout=30)

        await asyncio.gather(*(fill(q, per_queue + (1 if q < messages % QUEUES else 0)) for q in range(QUEUES)))
    finally:
        await producer.shutdown()


async def sdk_rate(namesrv: str, messages: int) -> Figure:
    consumer = LitePullConsumer(f"spark-bench-sdk-{os.getpid()}", namesrv, instance_name="spark-bench-sdk",
                                pull_batch_size=32, auto_commit=False,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.assign([MessageQueue(TOPIC, "broker-a", q) for q in range(QUEUES)])
    got = 0
    with Figure(messages) as sdk:
        await consumer.start()
        try:
            deadline = time.monotonic() + 1800
            while got < messages and time.monotonic() < deadline:
                got += len(await consumer.poll(5.0))
        finally:
            await consumer.shutdown()
    if got != messages:
        raise RuntimeError(f"lite pull consumer got {got} of {messages}")
    return sdk


def _stat(path: str) -> list[str] | None:
    """The fields of a /proc stat file after the command's name (field 3 on); None when gone."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None  # gone since the listing


def process_tree(root: int) -> list[int] | None:
    """``root`` and every live process under it, from /proc; None off Linux."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    children: dict[int, list[int]] = {}
    for pid in pids:
        if (fields := _stat(f"/proc/{pid}/stat")) is not None:
            children.setdefault(int(fields[1]), []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def cpu_seconds() -> float:
    """CPU seconds (user and system, with reaped children's) spent so far by this process and every
    live process under it -- the broker, the SDK in this process, Spark's JVM and its Python
    workers -- from /proc; NaN off Linux. What a read costs in CPU is what a busy machine's
    scheduler does not skew as it skews rates (the more processes a side runs, the larger its
    share of an oversubscribed machine)."""
    tree = process_tree(os.getpid())
    if tree is None:
        return math.nan
    tick = os.sysconf("SC_CLK_TCK")
    return sum(sum(int(x) for x in fields[11:15]) / tick
               for pid in tree if (fields := _stat(f"/proc/{pid}/stat")) is not None)


def jit_threads(root: int | None = None) -> dict[int, float]:
    """CPU seconds spent so far by each JIT compiler thread (``C1 CompilerThre``, ``C2 Compiler...``)
    of the JVMs in ``root`` (this process by default) and every process under it, by thread id,
    from /proc; empty where there are none or off Linux. HotSpot stops compiler threads that idle
    and starts them again: compare two of these by thread (``jit_seconds_since``)."""
    tick, spent = os.sysconf("SC_CLK_TCK"), {}
    for pid in process_tree(os.getpid() if root is None else root) or ():
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    name, _, rest = f.read().partition("(")[2].rpartition(")")
            except OSError:
                continue
            if name.startswith(("C1 Compiler", "C2 Compiler")):
                spent[int(task)] = sum(int(x) for x in rest.split()[11:13]) / tick
    return spent


def jit_seconds_since(before: dict[int, float], root: int | None = None) -> float:
    """CPU seconds of the JIT compiler threads since ``before`` (``jit_threads``): a lower bound, as
    a thread that ended in between took its share with it."""
    return sum(seconds - before.get(tid, 0.0) for tid, seconds in jit_threads(root).items())


class Figure:
    """A timed phase: its rate and the CPU microseconds every process of the run spent per message
    (and of that, the JVM's JIT compiler threads)."""

    def __init__(self, messages: int) -> None:
        self.messages = messages
        self.rate = self.cpu_us = self.jit_us = math.nan

    def __enter__(self) -> Figure:
        self._began, self._cpu, self._jit = time.perf_counter(), cpu_seconds(), jit_threads()
        return self

    def __exit__(self, *exc: object) -> None:
        self.rate = self.messages / (time.perf_counter() - self._began)
        self.cpu_us = (cpu_seconds() - self._cpu) / self.messages * 1e6
        self.jit_us = jit_seconds_since(self._jit) / self.messages * 1e6


def spark_rates(namesrv: str, messages: int, scratch: str) -> tuple[Figure, Figure]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import rocketmq_py.client.spark

    spark = (SparkSession.builder.master("local[2]").appName("spark-read-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rocketmq_py.client.spark.register(spark)
    try:
        def df(**options: str):  # type: ignore[no-untyped-def]
            reader = spark.read.format("rocketmq").option("namesrvAddr", namesrv).option("topic", TOPIC)
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load()

        # Warm-up, untimed: the first query of a session pays for forking the Python workers
        # (seconds), and the JVM's JIT compiles Spark's per-query and per-row code over the first
        # few queries (after one small read, its compiler threads still took 1.7 us of CPU per row
        # of the timed count() and 5.1 of the parquet write). The SDK is measured in an already
        # running process, so Spark is measured warm too: the head of each queue into count() and
        # into parquet, then the whole topic twice.
        head = json.dumps({f"broker-a:{q}": 10_000 for q in range(QUEUES)})
        df(endingOffsets=head).count()
        df(endingOffsets=head).write.mode("overwrite").parquet(os.path.join(scratch, "warm-up"))
        for _ in range(2):
            df().count()
        with Figure(messages) as count:
            counted = df().count()
        if counted != messages:
            raise RuntimeError(f"spark counted {counted} of {messages}")
        out = os.path.join(scratch, "parquet")
        with Figure(messages) as parquet:
            df().write.mode("overwrite").parquet(out)
        written = spark.read.parquet(out).count()
        if written != messages:
            raise RuntimeError(f"parquet holds {written} of {messages}")
        return count, parquet
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="spark-read-bench-")
    ns = broker = None
    try:
        ns = start_namesrv(os.path.join(scratch, "ns"))
        broker = start_broker(os.path.join(scratch, "broker"), ns.addr, "flushDiskType=ASYNC_FLUSH")
        began = time.perf_counter()
        run(load(ns.addr, broker.addr, args.messages))
        print(f"loaded {args.messages} x 1 KiB into {QUEUES} queues in {time.perf_counter() - began:.1f} s",
              flush=True)
        sdk = run(sdk_rate(ns.addr, args.messages))
        print(f"SDK lite pull: {sdk.rate:,.0f} msgs/s, {sdk.cpu_us:.1f} CPU us/msg", flush=True)
        count, parquet = spark_rates(ns.addr, args.messages, scratch)
        print(f"Spark read -> count(): {count.rate:,.0f} rows/s, {count.cpu_us:.1f} CPU us/row "
              f"({count.jit_us:.1f} JIT); -> parquet: {parquet.rate:,.0f} rows/s, {parquet.cpu_us:.1f} CPU us/row "
              f"({parquet.jit_us:.1f} JIT)", flush=True)
    finally:
        for d in (broker, ns):
            if d is not None:
                d.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"messages": args.messages, "spark_rows_per_s": round(count.rate),
                      "spark_parquet_rows_per_s": round(parquet.rate), "sdk_msgs_per_s": round(sdk.rate),
                      "ratio": round(count.rate / sdk.rate, 3), "ratio_parquet": round(parquet.rate / sdk.rate, 3),
                      "sdk_cpu_us_per_msg": round(sdk.cpu_us, 2), "spark_cpu_us_per_row": round(count.cpu_us, 2),
                      "spark_parquet_cpu_us_per_row": round(parquet.cpu_us, 2),
                      "cpu_ratio": round(sdk.cpu_us / count.cpu_us, 3),
                      "spark_jit_cpu_us_per_row": round(count.jit_us, 2),
                      "spark_parquet_jit_cpu_us_per_row": round(parquet.jit_us, 2),
                      "loadavg": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
