"""What a Spark task reads: one offset range of one MessageQueue, and how ranges are split.

Partitions are pickled to the executors, so they are plain values: the queue, its master's
address as the driver resolved it, and [start, end) in queue offsets. No socket crosses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True)
class QueueRange(InputPartition):
    topic: str
    broker_name: str
    broker_addr: str
    queue_id: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def split_ranges(ranges: Sequence[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """One partition per non-empty queue range; with ``minPartitions`` above that count, big
    ranges are cut into pieces of at most total/minPartitions offsets (as Spark's Kafka source
    does), so a few hot queues still spread over every core."""
    non_empty = [r for r in ranges if r.size > 0]
    if not min_partitions or min_partitions <= len(non_empty):
        return non_empty
    piece = max(1, math.ceil(sum(r.size for r in non_empty) / min_partitions))
    return [QueueRange(r.topic, r.broker_name, r.broker_addr, r.queue_id, start, min(start + piece, r.end))
            for r in non_empty for start in range(r.start, r.end, piece)]
