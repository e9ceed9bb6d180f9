"""A topic created or updated has its queues' first ConsumeQueue files made by the allocator's
thread, and its first messages take them: made by those puts on the event loop they held every
message in flight, a new topic of eight queues eight times over (docs/latency.md, "A new topic's
first messages"). Nothing a reader sees changes until a put takes one, and a file made ahead
that no put took is removed with its topic, at shutdown, and read as an empty queue after a
crash."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rocketmq_py.store import consume_queue_store, mapped_file
from rocketmq_py.store.config import BrokerRole
from rocketmq_py.store.consume_queue_store import MAKE_AHEAD_MAX_QUEUES
from rocketmq_py.store.mapped_file import wait_allocator
from rocketmq_py.store.message_store import DefaultMessageStore, GetMessageStatus
from tests.store_helpers import message, small_config

CQ_SIZE = 6_000_000


def _config(root: str, **overrides: object) -> object:
    return small_config(root, mappedFileSizeConsumeQueue=CQ_SIZE, messageIndexInChildProcess=False, **overrides)


def _exists(*path: str) -> bool:
    return os.path.exists(os.path.join(*path))


def _size(path: str) -> int:
    return os.path.getsize(path)


def _first_file(root: str, topic: str, queue_id: int) -> str:
    return os.path.join(root, "consumequeue", topic, str(queue_id), f"{0:020d}")


async def _started(root: str, **overrides: object) -> DefaultMessageStore:
    store = DefaultMessageStore(_config(root, **overrides))  # type: ignore[arg-type]
    await store.load()
    await store.start()
    return store


async def test_a_new_topic_s_first_puts_make_no_file_on_the_loop(tmp_path: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    root = str(tmp_path)
    store = await _started(root)
    try:
        assert store.append_message(message("Warm", b"w")).ok  # the CommitLog's first file taken
        assert store.make_consume_queues_ahead("Ahead", 4) == 4
        wait_allocator()
        for q in range(4):
            assert _size(_first_file(root, "Ahead", q)) == CQ_SIZE
            # Not a queue yet: readers see the topic as before.
            assert store.consume_queue_store.existing("Ahead", q) is None
            assert store.get_max_offset_in_queue("Ahead", q) == 0
        # Asking again (an update of the same topic) makes nothing twice.
        assert store.make_consume_queues_ahead("Ahead", 4) == 0
        loop_thread = threading.get_ident()
        on_loop: list[str] = []
        create, reserve = mapped_file.create_reserved, mapped_file.MappedFile.reserve

        def recording_create(path: str, size: int, reserve: int | None = None) -> None:
            if threading.get_ident() == loop_thread:
                on_loop.append(f"create {path}")
            create(path, size, reserve)

        def recording_reserve(mf: mapped_file.MappedFile, end: int, chunk: int) -> None:
            if threading.get_ident() == loop_thread and "consumequeue" in mf.path:
                on_loop.append(f"reserve {mf.path}")
            reserve(mf, end, chunk)

        monkeypatch.setattr(mapped_file, "create_reserved", recording_create)
        monkeypatch.setattr(mapped_file.MappedFile, "reserve", recording_reserve)
        for q in range(4):
            assert store.append_message(message("Ahead", f"m{q}".encode(), queue_id=q)).ok
        # A queue the topic gained later, never made ahead, is still made by its put.
        assert store.append_message(message("Ahead", b"late", queue_id=5)).ok
        assert on_loop == [f"create {_first_file(root, 'Ahead', 5)}", f"reserve {_first_file(root, 'Ahead', 5)}"]
        for q in range(4):
            cq = store.consume_queue_store.existing("Ahead", q)
            assert cq is not None and [mf.path for mf in cq.queue.files] == [_first_file(root, "Ahead", q)]
            assert cq.queue.files[0].reserved == 2 * 16 * 1024  # its first put's reservation, made ahead
            got = store.get_message("g", "Ahead", q, 0, 32)
            assert got.status is GetMessageStatus.FOUND and got.message_count == 1
            assert store.get_max_offset_in_queue("Ahead", q) == 1
        assert store.consume_queue_store.made_ahead == {}
    finally:
        await store.shutdown()


async def test_files_no_put_took_go_with_their_topic_and_at_shutdown(tmp_path: str) -> None:
    root = str(tmp_path)
    store = await _started(root)
    try:
        # Deleted before the allocator has made them, or after: either way nothing is left.
        store.make_consume_queues_ahead("Gone", 3)
        store.delete_topics({"Gone"})
        wait_allocator()
        assert not _exists(root, "consumequeue", "Gone")
        # Created again at once: its files are made again, and the removal of the first ones,
        # which ran before, does not take them.
        store.make_consume_queues_ahead("Again", 2)
        wait_allocator()
        store.delete_topics({"Again"})
        store.make_consume_queues_ahead("Again", 2)
        wait_allocator()
        assert _exists(_first_file(root, "Again", 1))
        assert store.append_message(message("Again", b"a", queue_id=1)).ok
        store.make_consume_queues_ahead("Unused", 2)
    finally:
        await store.shutdown()
    assert not _exists(root, "consumequeue", "Unused")
    assert not _exists(root, "consumequeue", "Again", "0")
    assert _size(_first_file(root, "Again", 1)) == CQ_SIZE
    store = await _started(root)
    try:
        assert store.get_max_offset_in_queue("Again", 1) == 1
        assert store.consume_queue_store.existing("Unused", 0) is None
    finally:
        await store.shutdown()


async def test_none_on_a_slave_nor_on_a_disk_above_its_warning_ratio(tmp_path: str) -> None:
    slave = await _started(os.path.join(str(tmp_path), "slave"), brokerRole=BrokerRole.SLAVE)
    try:
        assert slave.make_consume_queues_ahead("OnSlave", 2) == 0
    finally:
        await slave.shutdown()
    # Any disk in use is above this warning ratio: a put would be refused, and so is this.
    store = await _started(os.path.join(str(tmp_path), "full"), diskSpaceWarningLevelRatio=0.000001)
    try:
        assert store.disk_full
        assert store.make_consume_queues_ahead("OnFull", 2) == 0
        assert not _exists(str(tmp_path), "full", "consumequeue", "OnFull")
    finally:
        await store.shutdown()


@pytest.mark.parametrize("then_clean", [False, True])
async def test_a_file_made_ahead_and_left_by_a_crash_is_an_empty_queue(tmp_path: str, then_clean: bool) -> None:
    """Killed after the allocator made a topic's files and before any message: the restart finds
    empty 6,000,000-byte files, and recovery (after the crash, and after a clean stop following
    it) reads each as a queue with no unit: offsets 0, its first message at 0, nothing deleted."""
    root = os.path.join(str(tmp_path), "crashed")
    store = await _started(root)
    for i in range(3):
        assert store.append_message(message("Torn", f"m{i}".encode())).ok
    store.make_consume_queues_ahead("Left", 2)
    wait_allocator()
    # Killed: no shutdown (the abort file stays, the files made ahead too).
    for task in store._tasks:
        task.cancel()
    store.commit_log.queue.close()
    for queues in store.consume_queue_table.values():
        for cq in queues.values():
            cq.queue.close()
    os.close(store._lock_fd)  # type: ignore[arg-type]
    assert _exists(root, "abort")
    if then_clean:
        store = await _started(root)
        await store.shutdown()
    store = await _started(root)
    try:
        for q in range(2):
            assert _size(_first_file(root, "Left", q)) == CQ_SIZE
            assert store.get_max_offset_in_queue("Left", q) == 0
            assert store.get_min_offset_in_queue("Left", q) == 0
            assert store.get_message("g", "Left", q, 0, 32).status is not GetMessageStatus.FOUND
        result = store.append_message(message("Left", b"first", queue_id=1))
        assert result.ok and result.append_result is not None and result.append_result.logics_offset == 0
        got = store.get_message("g", "Left", 1, 0, 32)
        assert got.status is GetMessageStatus.FOUND and got.message_count == 1
        store.clean_consume_queue_service.delete_expired_files(store.commit_log.min_offset)
        assert _exists(_first_file(root, "Left", 0)) and store.get_max_offset_in_queue("Left", 1) == 1
        assert store.get_max_offset_in_queue("Torn", 0) == 3
    finally:
        await store.shutdown()


async def test_files_still_queued_hold_up_neither_a_put_nor_the_commit_log(tmp_path: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of topics created at once queue their files on a thread of their own: the
    CommitLog's next file never waits behind them, and a put whose queue's file has not had its
    turn yet makes it itself, as before, instead of waiting for every file queued before it."""
    root = str(tmp_path)
    store = await _started(root, mappedFileSizeCommitLog=64 * 1024)
    held = threading.Event()
    allocate = mapped_file._allocate

    def slow_for_earlier(path: str, *args: int) -> str:  # a slow disk, or thousands of files before
        if "Earlier" in path:
            held.wait(30)
        return allocate(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(mapped_file, "_allocate", slow_for_earlier)
    try:
        assert store.make_consume_queues_ahead("Earlier", 1) == 1
        assert store.make_consume_queues_ahead("Queued", 2) == 2
        t0 = time.monotonic()
        for i in range(200):  # 200 records of ~1 KiB: three CommitLog files of 64 KiB, two rolls
            assert store.append_message(message("Queued", b"q" * 1000, queue_id=i % 2)).ok
        assert time.monotonic() - t0 < 10, "a put waited for the queued files"
        assert len(store.commit_log.queue.files) >= 3
        for q in range(2):
            cq = store.consume_queue_store.existing("Queued", q)
            assert cq is not None and [mf.path for mf in cq.queue.files] == [_first_file(root, "Queued", q)]
            assert store.get_max_offset_in_queue("Queued", q) == 100
    finally:
        held.set()
        await store.shutdown()
    wait_allocator()  # the cancelled jobs never ran: the files the puts made are the queues'
    assert _size(_first_file(root, "Queued", 1)) == CQ_SIZE


async def test_a_shutdown_does_not_wait_for_files_not_begun(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files queued behind a slow one and never taken are cancelled at shutdown, not made and
    removed: the store stops once the file being made is done, and leaves none of them."""
    root = str(tmp_path)
    store = await _started(root)
    held = threading.Event()
    made: list[str] = []
    allocate = mapped_file._allocate

    def slow_first(path: str, *args: int) -> str:
        made.append(path)
        if len(made) == 1:
            held.wait(30)
        return allocate(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(mapped_file, "_allocate", slow_first)
    for t in range(20):
        store.make_consume_queues_ahead(f"Many{t}", 8)
    drop = store.consume_queue_store.drop_made_ahead

    def drop_then_finish(topics: set[str] | None = None) -> None:
        drop(topics)
        held.set()  # the file being made finishes after the store has let the others go

    monkeypatch.setattr(store.consume_queue_store, "drop_made_ahead", drop_then_finish)
    await store.shutdown()
    assert made == [_first_file(root, "Many0", 0)]
    assert not _exists(root, "consumequeue", "Many0") and not _exists(root, "consumequeue", "Many19")


async def test_a_topic_of_thousands_of_queues_has_only_its_first_made_ahead(tmp_path: str) -> None:
    """One UPDATE_AND_CREATE_TOPIC may name 65,536 queues: only the first MAKE_AHEAD_MAX_QUEUES
    get files before a message comes (a hostile request made a broker make, and at shutdown remove,
    thousands), and a queue past them is made by its first put, as before."""
    root = str(tmp_path)
    store = await _started(root)
    try:
        assert store.make_consume_queues_ahead("Wide", 65536) == MAKE_AHEAD_MAX_QUEUES
        wait_allocator()
        assert len(os.listdir(os.path.join(root, "consumequeue", "Wide"))) == MAKE_AHEAD_MAX_QUEUES
        assert store.append_message(message("Wide", b"w", queue_id=5000)).ok
        assert _exists(_first_file(root, "Wide", 5000))
        assert store.get_max_offset_in_queue("Wide", 5000) == 1
    finally:
        await store.shutdown()
    assert sorted(os.listdir(os.path.join(root, "consumequeue", "Wide"))) == ["5000"]


async def test_files_waiting_for_their_puts_are_bounded(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of topics created at once get files ahead only while fewer than
    MAKE_AHEAD_MAX_FILES wait for their first puts; the rest are made by those puts, as before."""
    monkeypatch.setattr(consume_queue_store, "MAKE_AHEAD_MAX_FILES", 10)
    root = str(tmp_path)
    store = await _started(root)
    try:
        assert store.make_consume_queues_ahead("First", 8) == 8
        assert store.make_consume_queues_ahead("Second", 8) == 2
        assert store.make_consume_queues_ahead("Third", 8) == 0
        assert store.append_message(message("First", b"f", queue_id=0)).ok  # one taken: room for one
        assert store.make_consume_queues_ahead("Third", 8) == 1
        assert store.append_message(message("Second", b"s", queue_id=7)).ok  # made by its put
        assert store.get_max_offset_in_queue("Second", 7) == 1
    finally:
        await store.shutdown()
