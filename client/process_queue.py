"""ProcessQueue: one assigned queue's pull position, consume position and cached messages.

Java keeps these in three places (the PullRequest's nextOffset, the ProcessQueue's message tree,
the lite consumer's MessageQueueState with its paused flag); here one object per queue holds
them, and a seek or a rebalance replaces it rather than resetting it, so whatever still holds
the old one -- a pulled batch, a listener call -- can tell it is stale (Java's dropped flag).
"""

from __future__ import annotations

import asyncio

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.running_info import process_queue_info
from rocketmq_py.remoting.protocol.message import MessageExt


class ProcessQueue:
    """One queue's state while this consumer holds it.

    A push consumer caches what it pulled in ``msgs`` until its listener is done with it. Pulls
    of a queue arrive in offset order, so the dict's insertion order is offset order and its
    first key is the lowest offset still being consumed: the queue's offset can advance to it
    and no further, whatever order the listener finishes in.
    """

    __slots__ = ("consumed_offset", "max_offset", "mq", "msgs", "next_offset", "paused", "size", "task")

    def __init__(self, mq: MessageQueue, next_offset: int = -1, consumed_offset: int = -1,
                 paused: bool = False) -> None:
        self.mq = mq
        self.next_offset = next_offset
        self.consumed_offset = consumed_offset
        self.paused = paused
        self.task: asyncio.Task[None] | None = None
        self.msgs: dict[int, MessageExt] = {}
        self.size = 0
        self.max_offset = -1

    def put(self, msgs: list[MessageExt]) -> None:
        for msg in msgs:
            if msg.queue_offset not in self.msgs:
                self.msgs[msg.queue_offset] = msg
                self.size += len(msg.body)
        self.max_offset = max(self.max_offset, msgs[-1].queue_offset)

    def remove(self, msg: MessageExt) -> int:
        """Forget a consumed message; returns the offset the queue may commit now."""
        if self.msgs.pop(msg.queue_offset, None) is not None:
            self.size -= len(msg.body)
        return next(iter(self.msgs)) if self.msgs else self.max_offset + 1

    @property
    def count(self) -> int:
        return len(self.msgs)

    @property
    def span(self) -> int:
        return self.max_offset - next(iter(self.msgs)) if self.msgs else 0

    def info(self, locked: bool) -> dict[str, object]:
        """Java's ProcessQueueInfo of this queue, for GET_CONSUMER_RUNNING_INFO."""
        if not self.msgs:
            return process_queue_info(max(self.consumed_offset, 0), locked=locked)
        return process_queue_info(max(self.consumed_offset, 0), next(iter(self.msgs)), self.max_offset, self.count,
                                  self.size // (1024 * 1024), locked=locked)
