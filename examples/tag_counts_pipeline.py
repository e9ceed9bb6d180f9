"""Example pipeline: count a topic's messages per tag over time windows, into a topic and parquet.

Reads ``--source`` as a stream, groups by 10-second windows of storeTimestamp and by tag, and
writes each closed window (JSON bodies, tag = the counted tag) to ``--sink-topic`` and to
parquet under ``--out``. With the package installed (``pip install 'rocketmq-py[spark]'``, or
``make`` in a checkout, then run with that environment's python), against a local standalone:

    mqstandalone &                                        # NameServer 9876 + broker, one process
    mqadmin updateTopic -n 127.0.0.1:9876 -t Orders -c DefaultCluster
    mqadmin updateTopic -n 127.0.0.1:9876 -t OrderTagCounts -c DefaultCluster
    python examples/tag_counts_pipeline.py --source Orders --sink-topic OrderTagCounts --out /tmp/tag-counts

Nothing else is needed: the connector runs Spark's local Python workers on this interpreter.

A window is written once it is closed: when a message stored after its end (plus ``--watermark``,
0 s by default) has been read. Without ``--available-now`` the queries run until interrupted and
each window is written as soon as a newer message arrives. ``--available-now`` reads what is
there, writes every window that data closes, and exits (a cron job, a test): the newest
window(s), which no message has closed yet, stay in the checkpoint and are written by the next
run that reads a newer message. Restarting with the same ``--checkpoint`` resumes exactly where
the last run stopped.
"""

from __future__ import annotations

import argparse
import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import rocketmq_py.client.spark


def tag_counts(spark: SparkSession, namesrv: str, topic: str, window: str, watermark: str) -> DataFrame:
    events = (spark.readStream.format("rocketmq").option("namesrvAddr", namesrv).option("topic", topic)
              .option("startingOffsets", "earliest").load())
    return (events.withWatermark("storeTimestamp", watermark)
            .groupBy(F.window("storeTimestamp", window).alias("w"), F.coalesce("tags", F.lit("")).alias("tag"))
            .agg(F.count("*").alias("messages"), F.sum(F.length("body")).alias("bytes"))
            .select(F.col("w.start").alias("windowStart"), F.col("w.end").alias("windowEnd"), "tag",
                    "messages", "bytes"))


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> None:
    """Run the pipeline; pass ``spark`` to use an existing session (it is then left running)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
                        help="NameServer address (default: NAMESRV_ADDR, else 127.0.0.1:9876)")
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink-topic", required=True)
    parser.add_argument("--out", required=True, help="parquet directory")
    parser.add_argument("--checkpoint", default=None, help="default: <out>/_checkpoints")
    parser.add_argument("--window", default="10 seconds", help="window length, Spark's interval syntax")
    parser.add_argument("--watermark", default="0 seconds", help="how late a message may be stored and count")
    parser.add_argument("--available-now", action="store_true",
                        help="write the windows the data closes, then exit (the newest wait for the next run)")
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint or os.path.join(args.out, "_checkpoints")

    own = spark is None
    if spark is None:
        spark = (SparkSession.builder.appName("rocketmq-tag-counts")
                 .master(os.environ.get("SPARK_MASTER", "local[2]"))
                 .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
                 .getOrCreate())
    rocketmq_py.client.spark.register(spark)
    counts = tag_counts(spark, args.namesrv, args.source, args.window, args.watermark)

    def start(writer, name: str):  # type: ignore[no-untyped-def]
        writer = writer.outputMode("append").option("checkpointLocation", os.path.join(checkpoint, name))
        writer = writer.trigger(availableNow=True) if args.available_now else writer
        return writer.start()

    to_topic = start(counts.select(F.col("tag").alias("tags"),
                                   F.to_json(F.struct(*counts.columns)).alias("body"))
                     .writeStream.format("rocketmq").option("namesrvAddr", args.namesrv)
                     .option("topic", args.sink_topic), "topic")
    to_parquet = start(counts.writeStream.format("parquet").option("path", os.path.join(args.out, "data")),
                       "parquet")
    for query in (to_topic, to_parquet):
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
    if own:
        spark.stop()


if __name__ == "__main__":
    main()
