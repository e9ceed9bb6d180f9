"""The ``rocketmq`` sink: ``df.write`` and ``writeStream`` into a topic through the SDK's producer.

Columns: ``body`` (binary or string, required), ``topic`` (else the ``topic`` option), ``tags``,
``keys``, ``properties`` (map<string,string>). Each task sends its rows in SEND_BATCH_MESSAGE
batches and waits for every answer: a refused message fails the task with the broker's code and
remark. A retried task sends its rows again, so delivery is at-least-once (as with Spark's Kafka
sink).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.message import Message
from rocketmq_py.client.spark.options import OptionError, SinkOptions
from rocketmq_py.client.sync import BlockingProducer

# A batch's encoded body must stay under the producer's 4 MiB; cut batches well before it.
MAX_BATCH_BYTES = 1024 * 1024


@dataclass
class SentCount(WriterCommitMessage):
    messages: int


def check_schema(opts: SinkOptions, schema: StructType) -> None:
    names = set(schema.fieldNames())
    if "body" not in names:
        raise OptionError(f"the rocketmq sink needs a 'body' column; the DataFrame has {sorted(names)}")
    if "topic" not in names and not opts.topic:
        raise OptionError("the rocketmq sink needs a 'topic' column or the topic option")


def _message(row: Any, fields: set[str], default_topic: str | None) -> Message:
    body = row["body"]
    if body is None:
        raise MQClientError("the rocketmq sink cannot send a row whose body is null")
    if isinstance(body, str):
        body = body.encode()
    topic = (row["topic"] if "topic" in fields else None) or default_topic
    if not topic:
        raise MQClientError("a row has no topic and the topic option is not set")
    props = dict(row["properties"] or {}) if "properties" in fields else {}
    return Message(topic=topic, body=bytes(body), tags=row["tags"] if "tags" in fields else None,
                   keys=row["keys"] if "keys" in fields else None, properties=props)


def send_rows(opts: SinkOptions, schema: StructType, rows: Iterator[Any]) -> int:
    """Send every row, in per-topic batches; raises on the first refused batch."""
    fields = set(schema.fieldNames())
    producer = BlockingProducer(opts.producer_group, opts.namesrv_addr, instance_name="spark-sink",
                                session_credentials=opts.credentials)
    producer.start()
    sent = 0
    pending: dict[str, list[Message]] = {}
    sizes: dict[str, int] = {}

    def flush(topic: str) -> None:
        nonlocal sent
        batch = pending.pop(topic, [])
        sizes.pop(topic, None)
        if batch:
            producer.send_batch(batch, timeout=opts.timeout)
            sent += len(batch)

    try:
        for row in rows:
            msg = _message(row, fields, opts.topic)
            pending.setdefault(msg.topic, []).append(msg)
            sizes[msg.topic] = sizes.get(msg.topic, 0) + len(msg.body) + 256
            if len(pending[msg.topic]) >= opts.batch_size or sizes[msg.topic] >= MAX_BATCH_BYTES:
                flush(msg.topic)
        for topic in list(pending):
            flush(topic)
    finally:
        producer.shutdown()
    return sent


class RowsWriter:
    """What the batch and the streaming writer share: the options and schema checked on the
    driver, and a task's rows sent and counted."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_schema(opts, schema)
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return SentCount(send_rows(self.opts, self.schema, iterator))


class RocketMQWriter(RowsWriter, DataSourceWriter):
    """The batch sink's writer (``df.write.format("rocketmq")``)."""


class RocketMQStreamWriter(RowsWriter, DataSourceStreamWriter):
    """The streaming sink's writer (``writeStream.format("rocketmq")``); a micro-batch commits nothing
    more than its tasks sent."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every message was acknowledged before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: sent messages stay sent (at-least-once)."""
