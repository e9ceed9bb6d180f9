"""The ``rocketmq`` data source: batch and streaming reads of a topic's ConsumeQueues.

Built on Spark 4's Python Data Source API, so there is no JVM jar: the driver plans one
partition per MessageQueue offset range (reader objects are pickled and hold no sockets), each
task pulls its range inside ``read()`` and yields Arrow record batches. A stream keeps its
position as ``{"brokerName:queueId": offset}`` in Spark's checkpoint, so a restart resumes
exactly there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from rocketmq_py.client.spark.options import LATEST, SourceOptions, queue_key, sink_options, source_options
from rocketmq_py.client.spark.partitions import QueueRange, split_ranges
from rocketmq_py.client.spark.reader import data_loss, read_range
from rocketmq_py.client.spark.records import SCHEMA_DDL
from rocketmq_py.client.spark.topic import QueueState, TopicView, resolve
from rocketmq_py.common.heap import freeze_startup_heap

log = logging.getLogger("rocketmq.spark")


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketMQStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rocketmq_py.client.spark.sink import RocketMQWriter

        return RocketMQWriter(sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rocketmq_py.client.spark.sink import RocketMQStreamWriter

        return RocketMQStreamWriter(sink_options(self.options), schema)


def _ranges(opts: SourceOptions, queues: dict[str, QueueState], start: dict[str, int], end: dict[str, int]
            ) -> list[QueueRange]:
    """Ranges to read, checked against what retention left: a start below a queue's min offset
    is data loss (fail, or skip to the min offset)."""
    out = []
    for key, stop in end.items():
        q = queues.get(key)
        begin = start.get(key, q.min_offset if q else 0)
        if q is None or stop <= begin:
            continue
        if begin < q.min_offset:
            data_loss(f"offsets {begin}..{min(stop, q.min_offset) - 1} of {opts.topic} {key} were deleted "
                      f"(the queue now starts at {q.min_offset})", opts.fail_on_data_loss)
            begin = q.min_offset
        if stop > begin:
            out.append(QueueRange(opts.topic, q.mq.broker_name, q.broker_addr, q.mq.queue_id, begin, stop))
    return out


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        view = TopicView(o.namesrv_addr, o.topic, o.timeout, o.credentials)
        try:
            queues = view.queues()
            start = resolve(o.starting_offsets, o.starting_timestamp, queues, view, "startingOffsets")
            end = resolve(o.ending_offsets, o.ending_timestamp, queues, view, "endingOffsets")
        finally:
            view.close()
        end = {k: min(v, queues[k].max_offset) for k, v in end.items()}
        parts = split_ranges(_ranges(o, queues, start, end), o.min_partitions)
        # Spark wants at least one partition; an empty one reads nothing.
        return parts or [QueueRange(o.topic, "", "", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        # Spark's Python worker runs a full collection after every task, which walked the ~68,000
        # objects of pyspark, pyarrow and this package each time (about 30 ms of CPU between two
        # tasks of a slot): frozen at the worker's first read, as a daemon's are at its start.
        # Only here, in Spark's workers: a process that calls read_range keeps its collector as is.
        freeze_startup_heap()
        if partition.size:
            yield from read_range(partition, self.opts)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"brokerName:queueId": next offset to read}``; a queue that appears when the
    topic's route grows starts at its earliest offset (nothing written to it is skipped)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._view: TopicView | None = None
        self._target: dict[str, int] | None = None  # availableNow: never read past this
        self._mirrored: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, object]:
        # A pickled reader carries options only: its Admin (sockets, a loop) stays on the driver.
        return {**self.__dict__, "_view": None}

    def _topic(self) -> TopicView:
        if self._view is None:
            self._view = TopicView(self.opts.namesrv_addr, self.opts.topic, self.opts.timeout, self.opts.credentials)
        return self._view

    def initialOffset(self) -> dict[str, int]:
        view = self._topic()
        queues = view.queues()
        return resolve(self.opts.starting_offsets, self.opts.starting_timestamp, queues, view, "startingOffsets")

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.opts.max_offsets_per_trigger
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: q.max_offset for k, q in self._topic().queues().items()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        # Spark plans a micro-batch only once the one before it is done, so ``start`` is fully
        # processed: mirror it now. commit() alone would never show the last batch of a query
        # (Spark commits a batch while planning the next), and stop() may be cut short.
        if start != self._mirrored:
            self._mirror(start)
        queues = self._topic().queues()
        latest = {k: q.max_offset for k, q in queues.items()}
        if self._target is not None:
            latest = {k: min(v, self._target[k]) for k, v in latest.items() if k in self._target}
        begin = {k: start.get(k, queues[k].min_offset) for k in latest}
        end = {k: max(latest[k], begin[k]) for k in latest}
        # Queues known to the checkpoint but gone from the route keep their offset.
        end.update({k: v for k, v in start.items() if k not in end})
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets(begin, end, limit.max_rows)
        return end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        queues = self._topic().queues()
        starts = {k: start.get(k, queues[k].min_offset if k in queues else 0) for k in end}
        return split_ranges(_ranges(self.opts, queues, starts, end), self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        freeze_startup_heap()  # as RocketMQBatchReader.read
        yield from read_range(partition, self.opts)

    def commit(self, end: dict[str, int]) -> None:
        """Mirror progress to ``consumerGroup``, so ``mqadmin consumerProgress`` shows the lag."""
        self._mirror(end)

    def _mirror(self, offsets: dict[str, int]) -> None:
        self._mirrored = dict(offsets)
        if self.opts.consumer_group:
            view = self._topic()
            try:
                view.commit(self.opts.consumer_group, offsets, view.queues())
            except Exception as exc:  # progress mirroring must never fail the query
                log.warning("mirroring offsets to group %s failed: %s", self.opts.consumer_group, exc)

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None


def cap_offsets(start: dict[str, int], end: dict[str, int], max_rows: int) -> dict[str, int]:
    """Admission control (maxOffsetsPerTrigger): shrink the ranges so they hold at most
    ``max_rows`` offsets in all, each queue getting a share proportional to its backlog."""
    sizes = {k: max(end[k] - start.get(k, end[k]), 0) for k in end}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(end)
    shares = {k: size * max_rows // total for k, size in sizes.items()}
    # Hand the rounding remainder to the biggest backlogs, so a batch is exactly max_rows.
    left = max_rows - sum(shares.values())
    for k in sorted(sizes, key=lambda k: (sizes[k] - shares[k]), reverse=True)[:left]:
        shares[k] += 1
    return {k: (start[k] + shares[k] if k in start else end[k]) for k in end}


__all__ = ["LATEST", "RocketMQDataSource", "cap_offsets", "queue_key"]
