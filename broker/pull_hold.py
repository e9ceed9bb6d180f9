"""Long polling: pulls that found nothing wait here for a message (Java's PullRequestHoldService).

A first pull attempt with the SUSPEND flag that finds no message is parked instead of answered.
It is re-run -- without further suspension -- as soon as the dispatcher reports a new message
for its queue that passes its filter, or when its suspend time runs out, or when the periodic
check (every 5 s; Java's cadence) finds the queue has grown past its offset, which covers a
notification missed for any reason. The re-run answers the client with whatever the pull then
finds (PULL_NOT_FOUND after a timeout). Unlike Java, each held pull also has its own timer, so it
is answered when its suspend time ends rather than at the next 5 s check.

A woken pull is re-run at once, inside the put that woke it, and its answer is written before the
producer's: the consumer, which is what end-to-end latency waits for, hears first, and no task or
loop turn is spent in between.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection

log = logging.getLogger("rocketmq.broker")


@dataclass(eq=False)
class PullRequest:
    request: RemotingCommand
    channel: RemotingConnection
    topic: str
    queue_id: int
    pull_from_this_offset: int
    suspend_seconds: float
    # tags_code -> bool: does a new message with this tag hash pass the request's filter?
    matches: Callable[[int | None], bool] = field(default=lambda _code: True)
    # properties string -> bool, for SQL92 subscriptions: a message whose properties fail the
    # selector leaves the pull parked (Java's isMatchedByCommitLog on arrival).
    matches_properties: Callable[[str], bool] | None = None
    timer: asyncio.TimerHandle | None = None


# Re-run a held pull with suspension off and write its answer on the channel (synchronously).
PullExecutor = Callable[[RemotingConnection, RemotingCommand], None]
# The queue's max offset (next offset to be written).
MaxOffsetLookup = Callable[[str, int], int]


class PullRequestHoldService:
    def __init__(self, executor: PullExecutor, max_offset: MaxOffsetLookup, check_interval: float = 5.0) -> None:
        self._executor = executor
        self._max_offset = max_offset
        self.check_interval = check_interval
        self._table: dict[tuple[str, int], list[PullRequest]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def held(self) -> int:
        return sum(len(v) for v in self._table.values())

    def suspend_pull_request(self, pull: PullRequest) -> None:
        self._table.setdefault((pull.topic, pull.queue_id), []).append(pull)
        pull.timer = asyncio.get_running_loop().call_later(pull.suspend_seconds, self._expire, pull)

    def on_message_arriving(self, topic: str, queue_id: int, logic_offset: int, tags_code: int,
                            store_timestamp: int, properties: str | bytes) -> bool:
        """The store's arrival listener (store.MessageArrivingListener): one call per new unit,
        so the usual case, no pull waiting on that queue, returns after one look-up; whether
        pulls still wait on the queue (a batch's later entries are announced only then)."""
        key = (topic, queue_id)
        if key not in self._table:
            return False
        self.notify_message_arriving(topic, queue_id, logic_offset, tags_code, properties)
        return key in self._table

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_code: int | None = None, properties: str | bytes | None = None) -> None:
        """Called by the dispatcher for each new consume-queue unit: wake what it satisfies.
        The periodic check passes no tag code or properties: then growth alone wakes a pull."""
        key = (topic, queue_id)
        held = self._table.get(key)
        if not held:
            return
        if isinstance(properties, bytes):
            properties = properties.decode()

        def satisfied(p: PullRequest) -> bool:
            if max_offset <= p.pull_from_this_offset or not p.matches(tags_code):
                return False
            return properties is None or p.matches_properties is None or p.matches_properties(properties)

        keep = [p for p in held if not satisfied(p)]
        if len(keep) == len(held):
            return
        for pull in held:
            if pull not in keep:
                self._wake(pull)
        if keep:
            self._table[key] = keep
        else:
            del self._table[key]

    def check_hold_request(self) -> None:
        for topic, queue_id in list(self._table):
            try:
                offset = self._max_offset(topic, queue_id)
            except Exception:
                log.exception("check hold request failed for %s@%s", topic, queue_id)
                continue
            self.notify_message_arriving(topic, queue_id, offset)

    def _expire(self, pull: PullRequest) -> None:
        held = self._table.get((pull.topic, pull.queue_id))
        if held is None or pull not in held:
            return
        held.remove(pull)
        if not held:
            del self._table[(pull.topic, pull.queue_id)]
        self._wake(pull)

    def _wake(self, pull: PullRequest) -> None:
        if pull.timer is not None:
            pull.timer.cancel()
        if not pull.channel.is_open:
            return
        try:
            self._executor(pull.channel, pull.request)
        except Exception:  # never into the put (or timer) that woke it
            log.exception("re-running a held pull of %s@%s failed", pull.topic, pull.queue_id)
            return
        pull.channel.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval)
            self.check_hold_request()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for held in self._table.values():
            for pull in held:
                if pull.timer is not None:
                    pull.timer.cancel()
        self._table.clear()
