"""ConsumeQueueStore: the table of every (topic, queue id)'s ConsumeQueue and what is asked of a
queue by name -- its bounds, the unit nearest a store time, the files a put will need (RocketMQ
5's ConsumeQueueStore; 4.9 keeps these in DefaultMessageStore)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Collection, Sequence

from rocketmq_py.remoting.protocol.message import QUEUED_TRANSACTION_TYPES, TRANSACTION_ROLLBACK_TYPE
from rocketmq_py.store.commit_log import CommitLog, MessageExtBatch, MessageExtBrokerInner, RunEntry
from rocketmq_py.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue, QueuesToFlush
from rocketmq_py.store.file_sync import flush_files
from rocketmq_py.store.mapped_file import allocate_first_files

# The most queues of a topic whose first files ``make_ahead`` makes: far more than a topic's usual
# 4-16, and a bound on what one UPDATE_AND_CREATE_TOPIC costs the disk and a shutdown (a topic may
# have 65,536 queues; their files, and their removal if no message comes, were made for each).
# The files of queues past it are made by their first puts, as every file was before.
MAKE_AHEAD_MAX_QUEUES = 64
# The most files made ahead and not yet taken by a put, over all topics: thousands of topics
# created at once (bench/scale.py's 10,000) had the allocator's thread make 80,000 files beside
# the loop, and creating them took 15.7 s instead of 7.0 (quiet). Past it a topic's files are made
# by its first puts, as before; a topic created and then used, the case made ahead for, is never
# near it.
MAKE_AHEAD_MAX_FILES = 1024


class ConsumeQueueStore:
    def __init__(self, root: str, file_size: int, commit_log: CommitLog,
                 space_check: Callable[[int], None], flush_least_pages: int = 2) -> None:
        """``flush_least_pages``: flushConsumeQueueLeastPages, by which a queue is due for the
        periodic flush (QueuesToFlush)."""
        self.root = root
        self.file_size = file_size
        self.commit_log = commit_log
        self.space_check = space_check
        # Never replaced (cleared, at most): the dispatcher and the store hold this same dict.
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.to_flush = QueuesToFlush(flush_least_pages)
        # Queues of topics just created whose first files the allocator is making
        # (``make_ahead``), until a put first asks for them (``find_consume_queue``).
        self.made_ahead: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if not os.path.isdir(self.root):
            return
        for topic in os.listdir(self.root):
            for qid in os.listdir(os.path.join(self.root, topic)):
                if qid.lstrip("-").isdigit():
                    self.find_consume_queue(topic, int(qid)).load()

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, made (with no file yet) when it does not exist."""
        queues = self.consume_queue_table.get(topic)
        if queues is None:
            # Keyed by the interned name, the object the plain sends store under
            # (TopicConfig.topicName): their look-ups match it by identity.
            topic = sys.intern(topic)
            queues = self.consume_queue_table[topic] = {}
        cq = queues.get(queue_id)
        if cq is None:
            made = self.made_ahead.pop((topic, queue_id), None) if self.made_ahead else None
            cq = queues[queue_id] = made if made is not None else self._new_queue(topic, queue_id)
        return cq

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(topic, queue_id, self.root, self.file_size, self.to_flush)
        cq.queue.space_check = self.space_check
        return cq

    def make_ahead(self, topic: str, queue_nums: int) -> int:
        """The first ConsumeQueue files of a topic's queues ``0 .. queue_nums - 1`` that have none
        (the first ``MAKE_AHEAD_MAX_QUEUES`` of them, while fewer than ``MAKE_AHEAD_MAX_FILES``
        wait for their puts), made now by the ConsumeQueue allocator's thread (reserved, their
        first pages read into the page cache), for its first messages to take
        (``allocate_first_files``): made by those puts, on the event loop, they cost 100-180 µs
        each and held every message in flight, eight times over for a new topic of eight queues
        (docs/latency.md). Java makes them on its dispatch thread at the first message. Nothing a
        reader sees changes until a put takes one: until then the queue is in no table, and a
        broker stopped before leaves no file (``drop_made_ahead``); a broker killed before
        leaves an empty file, which recovery reads as an empty queue (no valid unit). The number
        of files asked for."""
        table = self.commit_log.topic_queue_table
        made = []
        for queue_id in range(min(queue_nums, MAKE_AHEAD_MAX_QUEUES)):
            if len(self.made_ahead) >= MAKE_AHEAD_MAX_FILES:
                break
            key = topic, queue_id
            if key in self.made_ahead or self.existing(topic, queue_id) is not None or table.get(key, 0):
                continue  # (a queue on disk is in the table: ``load``)
            cq = self.made_ahead[key] = self._new_queue(topic, queue_id)
            made.append(cq.queue)
        allocate_first_files(made)
        return len(made)

    def drop_made_ahead(self, topics: set[str] | None = None) -> None:
        """The files made ahead for ``topics`` (all when None) and never taken removed: a topic
        deleted, or the store shut down."""
        for key in [key for key in self.made_ahead if topics is None or key[0] in topics]:
            self.made_ahead.pop(key).queue.drop_made_ahead()

    def existing(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queue_table.get(topic, {}).get(queue_id)

    def all_queues(self) -> list[ConsumeQueue]:
        return [cq for queues in self.consume_queue_table.values() for cq in queues.values()]

    # -- flushing ---------------------------------------------------------------------------

    def flush(self, queues: Sequence[ConsumeQueue], least_pages: int = 0) -> None:
        """The files of ``queues`` with unsynced units synced, the units kept for them while they
        were unmapped (MappedFile.write_at) written to them first, one pwrite per file (blocking:
        call it in a thread, as the flush service does; the event loop goes on adding units, and
        the lock of the pending bytes keeps the two apart). With ``least_pages``, as
        flushConsumeQueueLeastPages (MappedFileQueue.files_to_flush). Many files at once go in one
        syncfs (store/file_sync.py): a thorough flush or a shutdown after sends spread over 80,000
        queues was 80,000 fdatasyncs, a minute of them.

        The kept units are written here, not on the loop before: over 70,000 queues (10,000
        topics of 8 queues, most files unmapped past the mapping budget) their pwrites took the
        loop 0.6 s every thorough flush, in pieces of 2 to 10 ms."""
        files = []
        for cq in queues:
            dirty = cq.queue.files_to_flush()
            for mf in dirty:
                if mf.pending is not None:
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile: nothing to keep
                        mf.write_pending()
            files += cq.queue.files_to_flush(least_pages) if least_pages else dirty
        flush_files(files, self.root)

    def forget_flushed(self, queues: Sequence[ConsumeQueue]) -> None:
        """Queues of ``queues`` with nothing unsynced left out of the flush sets, the others'
        marks moved on (on the event loop, after ``flush``: a unit written while it ran keeps
        its queue in)."""
        due = self.to_flush.due
        for cq in queues:
            if not cq.dirty or not cq.queue.files:
                continue
            if cq.queue.is_flushed():
                cq.synced()
            else:  # a least-pages flush left units, or some were written meanwhile
                due.discard(cq)
                cq.note_written()

    def flush_dirty(self) -> None:
        """Every dirty queue flushed and forgotten in one call, where nothing writes meanwhile
        (the store's last flush at shutdown)."""
        queues = list(self.to_flush.dirty)
        self.flush(queues)
        self.forget_flushed(queues)

    def written_topics(self) -> set[str]:
        """The topics with a unit written since the previous call (some others at times); at the
        first, every topic. A queue written since is dirty still, or was synced after it
        (QueuesToFlush.synced_since): the answer costs the queues written, not every queue
        (BrokerStatsManager's per-topic put figures, every 10 s)."""
        to_flush = self.to_flush
        synced, to_flush.synced_since = to_flush.synced_since, set()
        if synced is None or len(to_flush.dirty) + len(synced) >= len(self.consume_queue_table) * 4:
            # Most queues written (or the first call): naming every topic is cheaper than
            # collecting the names from their queues.
            return set(self.consume_queue_table)
        return {cq.topic for cq in to_flush.dirty} | {cq.topic for cq in synced}

    def queue_totals(self, topics: Collection[str]) -> dict[str, int]:
        """The sum of the max offsets of each topic's queues (its messages put, counted from the
        queues' start), for the topics of ``topics`` that have queues (BrokerStatsManager's
        per-topic put figures, every 10 s, over ``written_topics``).

        When they are many, read from the CommitLog's topic queue table (a queue's next offset,
        set for every unit dispatched, by puts and a slave's dispatch alike, and rebuilt from the
        queues by recovery), one pass over its entries, rather than from each queue's last file
        through three properties: for 10,000 topics of 8 queues, all written between two ticks
        (bench/scale.py's topics_10k), 52-61 -> 17-21 ms of CPU a tick in-process (5 alternated)."""
        table = self.consume_queue_table
        if len(topics) * 4 < len(table):
            return {topic: sum([cq.max_offset_in_queue for cq in queues.values()])
                    for topic in topics if (queues := table.get(topic)) is not None}
        totals = dict.fromkeys([topic for topic in topics if topic in table], 0)
        for (topic, _), offset in self.commit_log.topic_queue_table.items():
            if topic in totals:
                totals[topic] += offset
        return totals

    # -- by name ----------------------------------------------------------------------------

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.existing(topic, queue_id)
        return cq.max_offset_in_queue if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.existing(topic, queue_id)
        return cq.min_offset_in_queue if cq else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.existing(topic, queue_id)
        unit = cq.unit_at(cq_offset) if cq else None
        return unit[0] if unit else 0

    def _unit_store_timestamp(self, cq: ConsumeQueue, index: int) -> int:
        unit = cq.unit_at(index)
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1]) if unit else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Binary search by store time: an exact match, else the nearer neighbour (Java's rule)."""
        cq = self.existing(topic, queue_id)
        if cq is None:
            return 0
        low, high = cq.min_offset_in_queue, cq.max_offset_in_queue - 1
        if high < low:
            return 0
        left, right = -1, -1
        while low <= high:
            mid = (low + high) // 2
            ts = self._unit_store_timestamp(cq, mid)
            if ts < 0:
                return 0
            if ts == timestamp:
                return mid
            if ts < timestamp:
                left, low = mid, mid + 1
            else:
                right, high = mid, mid - 1
        if left != -1 and right != -1:
            left_diff = timestamp - self._unit_store_timestamp(cq, left)
            right_diff = self._unit_store_timestamp(cq, right) - timestamp
            return left if left_diff <= right_diff else right
        if right != -1:
            return right
        return left + 1 if left != -1 else 0

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.existing(topic, queue_id)
        if cq is None:
            return -1
        return self._unit_store_timestamp(cq, cq.min_offset_in_queue)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.existing(topic, queue_id)
        return self._unit_store_timestamp(cq, cq_offset) if cq else -1

    def delete_topics(self, topics: set[str]) -> int:
        self.drop_made_ahead(topics)
        count = 0
        for topic in topics:
            queues = self.consume_queue_table.pop(topic, None)
            if not queues:
                continue
            for qid, cq in queues.items():
                cq.destroy()
                self.commit_log.topic_queue_table.pop((topic, qid), None)
                count += 1
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(self.root, topic))
        return count

    # -- the files a put needs ----------------------------------------------------------------

    def reserve_queue(self, topic: str, queue_id: int, count: int) -> ConsumeQueue | None:
        """The ConsumeQueue files for ``count`` more units of a queue, made before the CommitLog
        takes their records (``ConsumeQueue.reserve``); the queue when it was made for this put
        (``drop_made`` removes it again if the put is refused)."""
        queues = self.consume_queue_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        made = None
        if cq is None:
            cq = made = self.find_consume_queue(topic, queue_id)
        if not cq.has_room(count):
            try:
                cq.reserve(self.commit_log.topic_queue_table.get((topic, queue_id), 0), count)
            except OSError:
                self.drop_made(made)
                raise
        return made

    def reserve_message(self, msg: MessageExtBrokerInner) -> tuple[ConsumeQueue, ...]:
        """``reserve_queue`` for one message: the queues made for it. Every single put asks, and
        almost every time its queue's current file has reserved room (``has_room``'s rule, not the
        file's size: a unit past the reservation would be written with no disk held for it): that
        answer costs no call."""
        if msg.sys_flag & TRANSACTION_ROLLBACK_TYPE in QUEUED_TRANSACTION_TYPES:
            queues = self.consume_queue_table.get(msg.topic)
            cq = queues.get(msg.queue_id) if queues is not None else None
            if cq is not None and (files := cq.queue.files) and \
                    files[-1].wrote_position + CQ_STORE_UNIT_SIZE <= files[-1].reserved:
                return ()
            made = self.reserve_queue(msg.topic, msg.queue_id, 1)
            if made is not None:
                return made,
        return ()

    def reserve_batch(self, batch: MessageExtBatch) -> tuple[ConsumeQueue, ...]:
        """``reserve_message`` for a batch: its queue's current file mostly has room for it."""
        if batch.sys_flag & TRANSACTION_ROLLBACK_TYPE in QUEUED_TRANSACTION_TYPES:
            queues = self.consume_queue_table.get(batch.topic)
            cq = queues.get(batch.queue_id) if queues is not None else None
            count = batch.count
            if cq is not None and (files := cq.queue.files) and \
                    files[-1].wrote_position + count * CQ_STORE_UNIT_SIZE <= files[-1].reserved:
                return ()
            made = self.reserve_queue(batch.topic, batch.queue_id, count)
            if made is not None:
                return made,
        return ()

    def reserve_run(self, entries: Sequence[RunEntry]) -> list[ConsumeQueue]:
        count = len(entries)  # a bound on any one queue's share of the run
        room = count * CQ_STORE_UNIT_SIZE
        table = self.consume_queue_table
        seen = set()
        made: list[ConsumeQueue] = []
        try:
            for entry in entries:
                if entry[6] & TRANSACTION_ROLLBACK_TYPE in QUEUED_TRANSACTION_TYPES:
                    # Almost always the queue's current file has room for the whole run: that
                    # answer (``has_room``'s) costs no call and no key.
                    queues = table.get(entry[0])
                    cq = queues.get(entry[1]) if queues is not None else None
                    if cq is not None and (files := cq.queue.files) and \
                            files[-1].wrote_position + room <= files[-1].reserved:
                        continue
                    key = entry[0], entry[1]
                    if key not in seen:
                        seen.add(key)
                        cq = self.reserve_queue(key[0], key[1], count)
                        if cq is not None:
                            made.append(cq)
        except OSError:
            self.drop_made(*made)
            raise
        return made

    def drop_made(self, *queues: ConsumeQueue | None) -> None:
        """Queues made for a put that was refused, removed: a refused put leaves no trace."""
        table = self.consume_queue_table
        for cq in queues:
            if cq is None:
                continue
            cq.destroy()
            topic_queues = table.get(cq.topic)
            if topic_queues is not None and topic_queues.get(cq.queue_id) is cq:
                del topic_queues[cq.queue_id]
                if not topic_queues:
                    del table[cq.topic]
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(self.root, cq.topic))
