"""Spark batch read of a topic (into count() and into parquet) beside the SDK's lite-pull rate.

Real daemons (one NameServer, one Broker, ASYNC_FLUSH), a topic of 8 queues loaded with
``--messages`` 1 KiB messages (1,000,000 by default), then in the same run:

- the SDK: a LitePullConsumer assigned all 8 queues (32 per pull) polls until it has them all;
- Spark: ``spark.read.format("rocketmq")`` on ``local[2]`` from earliest to latest, once into
  ``count()`` and once written to parquet, after an untimed warm-up read of the first 10,000
  messages per queue (JIT, Python workers), as the SDK too is measured in a warm process.

    .venv/bin/python bench/spark_read.py [--messages 1000000]

Last line: one JSON object with spark_rows_per_s (the count), spark_parquet_rows_per_s,
sdk_msgs_per_s, ratio = spark_rows_per_s / sdk_msgs_per_s (issue 27's goal: >= 0.8),
ratio_parquet = spark_parquet_rows_per_s / sdk_msgs_per_s, and the machine's load averages over
the run's last 1, 5 and 15 minutes (the figures mean little on a busy machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


async def sdk_rate(namesrv: str, messages: int) -> float:
    consumer = LitePullConsumer(f"spark-bench-sdk-{os.getpid()}", namesrv, instance_name="spark-bench-sdk",
                                pull_batch_size=32, auto_commit=False,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.assign([MessageQueue(TOPIC, "broker-a", q) for q in range(QUEUES)])
    began = time.perf_counter()
    await consumer.start()
    got = 0
    try:
        deadline = time.monotonic() + 1800
        while got < messages and time.monotonic() < deadline:
            got += len(await consumer.poll(5.0))
    finally:
        took = time.perf_counter() - began
        await consumer.shutdown()
    if got != messages:
        raise RuntimeError(f"lite pull consumer got {got} of {messages}")
    return messages / took


def spark_rates(namesrv: str, messages: int, scratch: str) -> tuple[float, float]:
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

        # Warm-up, untimed: the first query of a session pays for the JVM's JIT and for forking the
        # Python workers (seconds); the SDK is measured in an already running process, so Spark
        # is measured warm too. It reads the first 10,000 messages of each queue.
        head = json.dumps({f"broker-a:{q}": 10_000 for q in range(QUEUES)})
        df(endingOffsets=head).count()
        began = time.perf_counter()
        counted = df().count()
        count_rate = counted / (time.perf_counter() - began)
        if counted != messages:
            raise RuntimeError(f"spark counted {counted} of {messages}")
        out = os.path.join(scratch, "parquet")
        began = time.perf_counter()
        df().write.mode("overwrite").parquet(out)
        parquet_rate = messages / (time.perf_counter() - began)
        written = spark.read.parquet(out).count()
        if written != messages:
            raise RuntimeError(f"parquet holds {written} of {messages}")
        return count_rate, parquet_rate
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
        print(f"SDK lite pull: {sdk:,.0f} msgs/s", flush=True)
        count_rate, parquet_rate = spark_rates(ns.addr, args.messages, scratch)
        print(f"Spark read -> count(): {count_rate:,.0f} rows/s; -> parquet: {parquet_rate:,.0f} rows/s", flush=True)
    finally:
        for d in (broker, ns):
            if d is not None:
                d.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"messages": args.messages, "spark_rows_per_s": round(count_rate),
                      "spark_parquet_rows_per_s": round(parquet_rate), "sdk_msgs_per_s": round(sdk),
                      "ratio": round(count_rate / sdk, 3), "ratio_parquet": round(parquet_rate / sdk, 3),
                      "loadavg": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
