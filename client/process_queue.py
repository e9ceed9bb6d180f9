"""ProcessQueue: the messages of one queue pulled but not yet consumed (Java's ProcessQueue).

A concurrent PushConsumer keeps pulling while its listener works, so something must bound
what piles up: the pull loop reads this queue's count, size and offset span to apply RocketMQ's
flow control. The offset committed for a queue is the smallest offset still in flight, so a
crash re-delivers rather than loses.
"""

from __future__ import annotations

from remoting.protocol.message import MessageExt


class ProcessQueue:
    def __init__(self) -> None:
        # Insertion order is offset order: one queue's batches arrive with rising offsets.
        self._msgs: dict[int, MessageExt] = {}
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False

    @property
    def msg_count(self) -> int:
        return len(self._msgs)

    def put(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            if m.queue_offset not in self._msgs:
                self._msgs[m.queue_offset] = m
                self.msg_size += len(m.body)
        if msgs:
            self.queue_offset_max = max(self.queue_offset_max, msgs[-1].queue_offset)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; returns the offset safe to commit, or -1 if none yet."""
        for m in msgs:
            if self._msgs.pop(m.queue_offset, None) is not None:
                self.msg_size -= len(m.body)
        if self._msgs:
            return next(iter(self._msgs))
        return self.queue_offset_max + 1 if self.queue_offset_max >= 0 else -1

    def min_offset(self) -> int:
        return next(iter(self._msgs)) if self._msgs else -1

    def max_span(self) -> int:
        """Java's getMaxSpan: how far the newest cached message is from the oldest."""
        if not self._msgs:
            return 0
        return next(reversed(self._msgs)) - next(iter(self._msgs))
