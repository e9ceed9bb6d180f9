"""Flushing consume queues costs what was written since their last sync, not the number of
queues: the periodic flush and the shutdown's look at the queues written since (the dirty set),
and many files go in one syncfs (store/file_sync.py)."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest

from rocketmq_py.remoting.protocol.message import decode_record
from rocketmq_py.store import file_sync
from rocketmq_py.store.mapped_file import MappedFile
from rocketmq_py.store.message_store import DefaultMessageStore
from tests.store_helpers import message, restarted, small_config
from tests.waiting import wait_until

TOPICS = 250  # of 8 queues: 2,000 queues
QUEUES = 8


class SyncLog:
    """The store files synced one by one (their paths) and the syncfs calls, while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files: list[str] = []
        self.syncfs = 0
        flush, syncfs = MappedFile.flush, file_sync.syncfs

        def counted_flush(mf: MappedFile, up_to: int | None = None) -> int:
            if mf.flushed_position < mf.wrote_position:
                self.files.append(mf.path)
            return flush(mf, up_to)

        def counted_syncfs(path: str) -> bool:
            done = syncfs(path)
            self.syncfs += done
            return done

        monkeypatch.setattr(MappedFile, "flush", counted_flush)
        monkeypatch.setattr(file_sync, "syncfs", counted_syncfs)

    def queue_files(self) -> list[str]:
        return [p for p in self.files if f"{os.sep}consumequeue{os.sep}" in p]

    def clear(self) -> None:
        self.files.clear()
        self.syncfs = 0


async def started(root: str, **overrides: object) -> DefaultMessageStore:
    store = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False, **overrides))
    await store.load()
    await store.start()
    return store


def put_spread(store: DefaultMessageStore, tag: str) -> dict[tuple[str, int], bytes]:
    """One acknowledged message in each of the 2,000 queues; their bodies by queue."""
    sent = {}
    for t in range(TOPICS):
        for q in range(QUEUES):
            body = f"{tag}-{t}-{q}".encode()
            assert store.append_message(message(f"Spread{t}", body, queue_id=q)).ok
            sent[(f"Spread{t}", q)] = body
    return sent


def stored_bodies(store: DefaultMessageStore, topic: str, qid: int) -> list[bytes]:
    return [decode_record(b).body for b in store.get_message("g", topic, qid, 0, 32).buffers]


@pytest.mark.skipif(not file_sync.syncfs_available(), reason="syncfs is Linux's")
async def test_shutdown_syncs_what_was_written_not_every_queue(tmp_path: str, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """A store of 2,000 queues written since their last sync shuts down with one syncfs, not
    2,000 fdatasyncs (a minute for 80,000 queues); one with 3 queues written syncs those 3
    files; one with nothing written syncs no queue file. After each restart every acknowledged
    message is there."""
    syncs = SyncLog(monkeypatch)
    store = await started(str(tmp_path))
    sent: dict[tuple[str, int], list[bytes]] = {key: [body] for key, body in put_spread(store, "a").items()}
    syncs.clear()
    store = await restarted(store)
    assert syncs.syncfs == 1 and syncs.queue_files() == [], "2,000 dirty queues: one syncfs, no file by file"
    assert {k: stored_bodies(store, *k) for k in sent} == sent

    for t, q in ((0, 0), (7, 3), (249, 7)):
        body = f"b-{t}-{q}".encode()
        assert store.append_message(message(f"Spread{t}", body, queue_id=q)).ok
        sent[(f"Spread{t}", q)].append(body)
    syncs.clear()
    store = await restarted(store)
    assert syncs.syncfs == 0
    assert sorted(syncs.queue_files()) == sorted(os.path.join(str(tmp_path), "consumequeue", f"Spread{t}", str(q),
                                                              "00000000000000000000")
                                                 for t, q in ((0, 0), (7, 3), (249, 7)))
    assert {k: stored_bodies(store, *k) for k in sent} == sent

    syncs.clear()
    store = await restarted(store)  # nothing written since the last start
    assert syncs.syncfs == 0 and syncs.queue_files() == []
    assert {k: stored_bodies(store, *k) for k in sent} == sent
    await store.shutdown()


async def test_without_syncfs_every_dirty_file_is_synced_on_its_own(tmp_path: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Where syncfs is missing (not Linux), the dirty queues' files are synced one by one, and
    nothing acknowledged is lost either."""
    syncs = SyncLog(monkeypatch)
    monkeypatch.setattr(file_sync, "_load_syncfs", lambda: None)
    store = await started(str(tmp_path))
    sent = {key: [body] for key, body in put_spread(store, "c").items()}
    syncs.clear()
    store = await restarted(store)
    assert syncs.syncfs == 0 and len(syncs.queue_files()) == TOPICS * QUEUES
    assert {k: stored_bodies(store, *k) for k in sent} == sent
    await store.shutdown()


async def test_the_periodic_flush_keeps_least_pages_and_forgets_synced_queues(tmp_path: str) -> None:
    """flushConsumeQueueLeastPages as in Java: a queue with fewer pages unsynced waits for the
    thorough flush, one with that many or a full file is due for the periodic flush; a queue
    synced leaves the flush sets, one written again joins them."""
    store = await started(str(tmp_path), mappedFileSizeConsumeQueue=6_000_000, flushIntervalConsumeQueue=3_600_000)
    cqs = store.consume_queue_store
    to_flush = cqs.to_flush
    try:
        assert store.append_message(message("Few", b"1")).ok
        for _ in range(409):  # 8,180 bytes of units: one short of two pages
            assert store.append_message(message("Many", b"m")).ok
        few, many = cqs.existing("Few", 0), cqs.existing("Many", 0)
        assert few is not None and many is not None
        assert to_flush.dirty == {few, many} and to_flush.due == set()
        assert store.append_message(message("Many", b"m")).ok  # the unit that ends the second page
        assert to_flush.due == {many}
        queues = list(to_flush.due)
        cqs.flush(queues, store.config.flushConsumeQueueLeastPages)
        cqs.forget_flushed(queues)
        assert few.queue.files[0].flushed_position == 0, "one unit is not two pages"
        assert many.queue.files[0].flushed_position == 410 * 20
        assert to_flush.dirty == {few} and to_flush.due == set()
        queues = list(to_flush.dirty)
        cqs.flush(queues)  # the thorough flush
        assert store.append_message(message("Many", b"m")).ok  # written while it ran: stays
        cqs.forget_flushed([*queues, many])
        assert few.queue.files[0].flushed_position == 20
        assert to_flush.dirty == {many} and to_flush.due == set()
        cqs.delete_topics({"Many"})
        assert to_flush.dirty == set(), "a deleted queue has nothing left to sync"
    finally:
        await store.shutdown()


async def test_a_full_file_is_due_at_once(tmp_path: str) -> None:
    """A queue whose file filled is due for the periodic flush whatever its pages (Java flushes
    a full file at once), and stays due while that file is unsynced."""
    store = await started(str(tmp_path))  # files of 50 units
    to_flush = store.consume_queue_store.to_flush
    try:
        for i in range(49):
            assert store.append_message(message("Roll", b"r")).ok
            assert to_flush.due == set(), i
        assert store.append_message(message("Roll", b"r")).ok
        cq = store.consume_queue_store.existing("Roll", 0)
        assert to_flush.due == {cq}
        assert store.append_message(message("Roll", b"r")).ok  # into the next file
        assert cq is not None and len(cq.queue.files) == 2 and to_flush.due == {cq}
        queues = list(to_flush.due)
        store.consume_queue_store.flush(queues, store.config.flushConsumeQueueLeastPages)
        store.consume_queue_store.forget_flushed(queues)
        assert cq.queue.files[0].flushed_position == 1000 and cq.queue.files[1].flushed_position == 0
        assert to_flush.due == set() and to_flush.dirty == {cq}
    finally:
        await store.shutdown()


async def test_the_flush_service_empties_the_dirty_set(tmp_path: str) -> None:
    """The running FlushConsumeQueueService syncs every queue written within its thorough
    interval, and the dirty set it goes through is empty afterwards."""
    store = await started(str(tmp_path), flushIntervalConsumeQueue=20, flushConsumeQueueThoroughInterval=100)
    try:
        sent = put_spread(store, "d")
        cqs = store.consume_queue_store
        assert await wait_until(lambda: not cqs.to_flush.dirty, 30, 0.02)
        assert all(cq.queue.is_flushed() for cq in cqs.all_queues())
        assert len(sent) == len(cqs.all_queues())
    finally:
        await store.shutdown()


async def test_a_failed_checkpoint_write_does_not_end_the_flush_service(tmp_path: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk failing the thorough round's checkpoint write is logged and the round tried
    again; the service goes on flushing (it had ended at the first such error, and with it every
    later ConsumeQueue flush)."""
    store = await started(str(tmp_path), flushIntervalConsumeQueue=20, flushConsumeQueueThoroughInterval=100)
    checkpoint = store.checkpoint
    assert checkpoint is not None
    write = checkpoint.flush
    calls: list[bool] = []

    def full_disk_twice() -> None:
        calls.append(len(calls) >= 2)
        if not calls[-1]:
            raise OSError(errno.ENOSPC, "No space left on device")
        write()

    monkeypatch.setattr(checkpoint, "flush", full_disk_twice)
    try:
        put_spread(store, "f")
        assert await wait_until(lambda: any(calls), 30, 0.02), f"checkpoint writes after the failures: {calls}"
        assert store.append_message(message("Spread0", b"after", queue_id=0)).ok
        cqs = store.consume_queue_store
        assert await wait_until(lambda: not cqs.to_flush.dirty, 30, 0.02)
    finally:
        await store.shutdown()


async def test_written_topics_are_those_written_since_the_last_call(tmp_path: str) -> None:
    """The topics with a unit written since the previous call, whether their queues are still
    unsynced or were synced meanwhile; at the first call every topic (the per-topic stats' start)."""
    store = await started(str(tmp_path))
    cqs = store.consume_queue_store
    try:
        put_spread(store, "e")
        assert cqs.written_topics() == {f"Spread{t}" for t in range(TOPICS)}
        assert cqs.written_topics() == {f"Spread{t}" for t in range(TOPICS)}, "still unsynced: written"
        cqs.flush_dirty()
        assert cqs.written_topics() == {f"Spread{t}" for t in range(TOPICS)}, "synced after being written"
        assert cqs.written_topics() == set()
        assert store.append_message(message("Spread3", b"x", queue_id=5)).ok
        assert store.append_message(message("Fresh", b"y")).ok
        queues = list(cqs.to_flush.dirty)
        cqs.flush(queues)
        cqs.forget_flushed(queues[:1])
        assert cqs.written_topics() == {"Spread3", "Fresh"}
        cqs.forget_flushed(queues)
        assert cqs.written_topics() == {"Spread3", "Fresh"} - {queues[0].topic}
        assert cqs.written_topics() == set()
    finally:
        await store.shutdown()


async def test_queue_totals_are_the_sums_of_the_queues_max_offsets(tmp_path: str) -> None:
    """ConsumeQueueStore.queue_totals, the per-topic put figures' source, sums each topic's
    queues' max offsets, whether it reads the queues (few topics asked) or the CommitLog's topic
    queue table (many): after puts, for topics unknown or with no unit, and after a restart."""
    store = await started(str(tmp_path))
    try:
        put_spread(store, "t")
        for n in range(5):
            assert store.append_message(message("Spread7", b"more", queue_id=n % 3)).ok
        store.consume_queue_store.find_consume_queue("Empty", 2)  # a queue with no unit yet

        def expected(topics: set[str]) -> dict[str, int]:
            table = store.consume_queue_table
            return {t: sum(cq.max_offset_in_queue for cq in table[t].values()) for t in topics if t in table}

        every = {f"Spread{t}" for t in range(TOPICS)} | {"Empty", "Unknown"}
        few = {"Spread7", "Spread8", "Empty", "Unknown"}
        cqs = store.consume_queue_store
        assert cqs.queue_totals(every) == expected(every)
        assert cqs.queue_totals(every)["Spread7"] == QUEUES + 5 and cqs.queue_totals(every)["Empty"] == 0
        assert cqs.queue_totals(few) == expected(few) == {"Spread7": QUEUES + 5, "Spread8": QUEUES, "Empty": 0}
    finally:
        await store.shutdown()
    store = await started(str(tmp_path))
    try:
        assert store.consume_queue_store.queue_totals(every) == expected(every)
        assert store.consume_queue_store.queue_totals(every)["Spread7"] == QUEUES + 5
    finally:
        await store.shutdown()


async def test_a_flush_forgets_its_queues_a_slice_per_turn_of_the_loop(tmp_path: str) -> None:
    """After the sync, the loop takes the flushed queues out of the flush sets in slices, other
    tasks running between them: a thorough flush after sends spread over 70,000 queues held the
    loop 70 ms in one piece for it."""
    store = await started(str(tmp_path), flushIntervalConsumeQueue=3_600_000)
    cqs = store.consume_queue_store
    try:
        put_spread(store, "s")
        total = len(cqs.to_flush.dirty)
        assert total == TOPICS * QUEUES
        seen: list[int] = []
        done = False

        async def watch() -> None:
            while not done:
                seen.append(len(cqs.to_flush.dirty))
                await asyncio.sleep(0)

        watcher = asyncio.get_running_loop().create_task(watch())
        assert await store.flush_consume_queue_service.flush_once(thorough=True)
        done = True
        await watcher
        assert not cqs.to_flush.dirty
        assert any(0 < size < total for size in seen), "other tasks ran while the queues were forgotten"
    finally:
        await store.shutdown()
