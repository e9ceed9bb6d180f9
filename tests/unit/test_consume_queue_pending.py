"""Units written to an unmapped ConsumeQueue file wait in memory (MappedFile.pending) and go into
the file by one pwrite per file: a reader sees them at once, a flush never counts them synced
before they are in the file, and a killed broker's recovery dispatches them again."""

from __future__ import annotations

import errno
import os
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketmq_py.store import mapped_file
from rocketmq_py.store.consume_queue import CQ_STORE_UNIT_SIZE
from rocketmq_py.store.file_sync import flush_files
from rocketmq_py.store.mapped_file import PAGE_SIZE, MappedFile, create_reserved
from rocketmq_py.store.message_store import DefaultMessageStore, GetMessageStatus
from tests.store_helpers import message, restarted, small_config

FILE_SIZE = 6000  # 300 units
_UNIT = struct.Struct(">qiq")

_ops = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(1, 250)),  # that many units, one write_at each
    st.tuples(st.sampled_from(["read", "flush", "release", "write_pending", "close"]), st.just(0))),
    max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_a_file_written_mapped_or_not_reads_flushes_and_closes_as_written(tmp_path: str, ops: list[tuple[str, int]]
                                                                         ) -> None:
    """Any interleaving of unit writes, reads, flushes, releases of the mapping and closes: every
    read sees every unit written, the flushed position never passes a byte that is not in the
    file, and the file holds every unit once closed."""
    path = os.path.join(str(tmp_path), f"{0:020d}")
    if os.path.exists(path):
        os.remove(path)
    create_reserved(path, FILE_SIZE)
    mf = MappedFile(path, FILE_SIZE)
    mf.release_idle = True
    written = bytearray()
    try:
        for op, n in ops:
            if op == "write":
                for _ in range(min(n, (FILE_SIZE - mf.wrote_position) // CQ_STORE_UNIT_SIZE)):
                    i = mf.wrote_position // CQ_STORE_UNIT_SIZE
                    unit = _UNIT.pack(1000 + i * 77, 77, i)
                    mf.write_at(mf.wrote_position, unit)
                    mf.wrote_position += CQ_STORE_UNIT_SIZE
                    written += unit
                assert mf.pending is None or len(mf.pending) < PAGE_SIZE
            elif op == "read":
                assert mf.read(0, mf.wrote_position) == written
                assert mf.pending is None  # mapped again: what was pending is in the file
            elif op == "flush":
                mf.flush()
                with open(path, "rb") as f:
                    assert f.read(mf.flushed_position) == written[:mf.flushed_position]
            elif op == "release":
                mf.unmap()
            elif op == "write_pending":
                mf.write_pending()
                assert mf.pending is None and mf.written_position == mf.wrote_position
            else:
                mf.close()
                with open(path, "rb") as f:
                    assert f.read(len(written)) == written
            assert mf.flushed_position <= mf.written_position <= mf.wrote_position
        mf.close()
        with open(path, "rb") as f:
            assert f.read(len(written)) == written
    finally:
        mf.destroy()


def _small_budget(monkeypatch: pytest.MonkeyPatch) -> mapped_file._Mappings:
    mappings = mapped_file._Mappings()
    mappings.limit = 64
    mappings._next_scan = 64
    monkeypatch.setattr(mapped_file, "MAPPINGS", mappings)
    return mappings


TOPICS = [f"Pend{t}" for t in range(50)]  # of 4 queues: 200 queues, past a budget of 64 mappings


def _put_rounds(store: DefaultMessageStore, rounds: range) -> None:
    for rnd in rounds:
        for t, topic in enumerate(TOPICS):
            for qid in range(4):
                assert store.append_message(message(topic, f"{t}-{qid}-{rnd}".encode(), queue_id=qid)).ok


def _all_found(store: DefaultMessageStore, rounds: int) -> None:
    for t, topic in enumerate(TOPICS):
        for qid in range(4):
            assert store.get_max_offset_in_queue(topic, qid) == rounds
            got = store.get_message("g", topic, qid, 0, rounds)
            assert got.status == GetMessageStatus.FOUND and len(got.buffers) == rounds, (topic, qid)
            assert all(f"{t}-{qid}-{rnd}".encode() in buf for rnd, buf in enumerate(got.buffers))


def _pending_files(store: DefaultMessageStore) -> list[MappedFile]:
    return [mf for qs in store.consume_queue_table.values() for cq in qs.values() for mf in cq.queue.files
            if mf.pending is not None]


async def test_units_of_unmapped_queues_wait_and_a_pull_sees_them(tmp_path: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """Past the mapping budget, the units of released files are kept, not written one system call
    each; a pull finds them all the same, and the flush service's thorough pass writes and syncs
    them, leaving no queue dirty."""
    _small_budget(monkeypatch)
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        _put_rounds(store, range(3))
        pending = _pending_files(store)
        assert pending, "units of released files are kept"
        writes: list[int] = []
        real_pwrite = os.pwrite

        def counted_pwrite(fd: int, data: bytes, pos: int) -> int:
            writes.append(len(data))
            return real_pwrite(fd, data, pos)

        monkeypatch.setattr(os, "pwrite", counted_pwrite)
        _put_rounds(store, range(3, 4))
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        assert not writes, "a unit of a released file costs no write of its own"
        cqs = store.consume_queue_store
        assert await store.flush_consume_queue_service.flush_once(thorough=True)
        assert not _pending_files(store)
        assert not cqs.to_flush.dirty
        _put_rounds(store, range(4, 5))
        _all_found(store, 5)  # pulls map the files again: what was kept is read
        assert not _pending_files(store)
    finally:
        await store.shutdown()


async def test_a_flush_stops_below_units_still_kept(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush that runs while units are kept (not yet written) syncs up to them, not past them:
    the queue stays dirty, and the next thorough pass writes and syncs them."""
    _small_budget(monkeypatch)
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        _put_rounds(store, range(2))
        cqs = store.consume_queue_store
        queues = list(cqs.to_flush.dirty)
        # The sync alone, as when units are kept after the flush's thread wrote a file's (the
        # loop writes on): what is kept is not synced.
        flush_files([mf for cq in queues for mf in cq.queue.files_to_flush()], cqs.root)
        for mf in _pending_files(store):
            assert mf.flushed_position <= mf.pending_at < mf.wrote_position
        cqs.forget_flushed(queues)
        kept = {cq for qs in store.consume_queue_table.values() for cq in qs.values()
                if any(mf.pending is not None for mf in cq.queue.files)}
        assert kept and kept <= cqs.to_flush.dirty
        assert await store.flush_consume_queue_service.flush_once(thorough=True)
        assert not cqs.to_flush.dirty and not _pending_files(store)
    finally:
        await store.shutdown()


@pytest.mark.parametrize("crash", [False, True])
async def test_kept_units_survive_a_restart_and_a_crash(tmp_path: str, monkeypatch: pytest.MonkeyPatch,
                                                        crash: bool) -> None:
    """A clean shutdown writes the kept units; a killed broker loses them, and its recovery
    (the abort file left) dispatches their records again: every acknowledged message is found."""
    _small_budget(monkeypatch)
    cfg = small_config(str(tmp_path), messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    _put_rounds(store, range(3))
    assert _pending_files(store)
    if not crash:
        store = await restarted(store)
    else:
        for task in store._tasks:
            task.cancel()
        for mf in _pending_files(store):
            mf.drop_pending()  # what a killed process loses: it was never in the page cache
        store.commit_log.queue.close()
        for qs in store.consume_queue_table.values():
            for cq in qs.values():
                cq.queue.close()
        store.checkpoint.close()  # type: ignore[union-attr]
        os.close(store._lock_fd)  # type: ignore[arg-type]
        store = DefaultMessageStore(cfg)
        await store.load()
        await store.start()
    try:
        _all_found(store, 3)
    finally:
        await store.shutdown()


def test_out_of_descriptors_a_flush_syncs_a_mapped_file_and_leaves_a_released_one(
        tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no descriptor to spare, a mapped file is synced by msync; a released one (which would
    need a descriptor to map, and whose pending bytes only the event loop writes) is left for the
    next flush, its position unchanged."""
    files = []
    for i in range(2):
        path = os.path.join(str(tmp_path), f"{i * FILE_SIZE:020d}")
        create_reserved(path, FILE_SIZE)
        mf = MappedFile(path, FILE_SIZE)
        mf.write_at(0, _UNIT.pack(1, 2, 3))
        mf.wrote_position = CQ_STORE_UNIT_SIZE
        files.append(mf)
    mapped, released = files
    released.unmap()
    released.write_at(CQ_STORE_UNIT_SIZE, _UNIT.pack(4, 5, 6))
    released.wrote_position += CQ_STORE_UNIT_SIZE
    real_open = os.open

    def no_descriptors(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if str(path).startswith(str(tmp_path)):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_descriptors)
    assert mapped.flush() == CQ_STORE_UNIT_SIZE
    with pytest.raises(OSError):
        released.flush()
    assert released.flushed_position == 0 and released.pending is not None
    monkeypatch.setattr(os, "open", real_open)
    assert released.flush() == CQ_STORE_UNIT_SIZE  # the unit before the pending one was in the file
    released.write_pending()
    assert released.flush() == 2 * CQ_STORE_UNIT_SIZE
    for mf in files:
        mf.destroy()


async def test_the_flush_thread_writes_the_kept_units_not_the_loop(tmp_path: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """A consume queue flush writes the units kept for unmapped files from its thread: over
    70,000 queues their pwrites took the event loop 0.6 s every thorough flush."""
    _small_budget(monkeypatch)
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False,
                                             flushIntervalConsumeQueue=3_600_000))
    await store.load()
    await store.start()
    try:
        _put_rounds(store, range(3))
        pending = _pending_files(store)
        assert pending
        writers: list[int] = []
        real_pwrite = os.pwrite

        def recorded_pwrite(fd: int, data: bytes, pos: int) -> int:
            writers.append(threading.get_ident())
            return real_pwrite(fd, data, pos)

        monkeypatch.setattr(os, "pwrite", recorded_pwrite)
        assert await store.flush_consume_queue_service.flush_once(thorough=True)
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        assert not _pending_files(store) and not store.consume_queue_store.to_flush.dirty
        assert len(writers) == len(pending)
        assert threading.get_ident() not in writers, "the units were written on the event loop"
        _all_found(store, 3)
    finally:
        await store.shutdown()


def test_a_unit_kept_while_the_flush_thread_writes_the_file_is_neither_lost_nor_refused(tmp_path: str) -> None:
    """The loop keeps a unit for a file whose kept units the flush's thread is writing at that
    moment: it waits for that write (the bytes of a write in progress are not resized under it)
    and its unit stays kept for the next one; the file ends with every unit."""
    path = os.path.join(str(tmp_path), f"{0:020d}")
    create_reserved(path, FILE_SIZE)
    mf = MappedFile(path, FILE_SIZE)
    mf.release_idle = True
    mf.unmap()
    units = [_UNIT.pack(1000 + i, 77, i) for i in range(3)]
    for unit in units[:2]:
        mf.write_at(mf.wrote_position, unit)
        mf.wrote_position += CQ_STORE_UNIT_SIZE
    in_write, go = threading.Event(), threading.Event()
    real_pwrite = os.pwrite
    errors: list[BaseException] = []

    def paused_pwrite(fd: int, data: bytes, pos: int) -> int:
        if threading.current_thread().name == "flush":
            in_write.set()
            assert go.wait(10)
        return real_pwrite(fd, data, pos)

    def loop_writes() -> None:
        try:
            assert in_write.wait(10)
            mf.write_at(mf.wrote_position, units[2])
            mf.wrote_position += CQ_STORE_UNIT_SIZE
        except BaseException as exc:
            errors.append(exc)

    os.pwrite = paused_pwrite  # type: ignore[assignment]
    try:
        flush = threading.Thread(target=mf.write_pending, name="flush")
        loop = threading.Thread(target=loop_writes, name="loop")
        flush.start()
        loop.start()
        loop.join(0.5)  # the loop's write waits for the thread's (or, unguarded, fails at once)
        go.set()
        flush.join(10)
        loop.join(10)
    finally:
        os.pwrite = real_pwrite  # type: ignore[assignment]
    assert not flush.is_alive() and not loop.is_alive()
    assert not errors, errors
    assert mf.pending == bytearray(units[2]) and mf.pending_at == 2 * CQ_STORE_UNIT_SIZE
    assert mf.written_position == 2 * CQ_STORE_UNIT_SIZE
    mf.close()
    with open(path, "rb") as f:
        assert f.read(3 * CQ_STORE_UNIT_SIZE) == b"".join(units)
    mf.destroy()
