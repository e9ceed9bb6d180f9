"""The store when files cannot be made (a full disk, no descriptors) and with many small files."""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketmq_py.store import mapped_file
from rocketmq_py.store.message_store import DefaultMessageStore, GetMessageStatus, PutMessageStatus
from tests.store_helpers import STORE_HOST, batch, message, restarted, small_config


def _refusing(errno_value: int, refuse: list[bool]):  # type: ignore[no-untyped-def]
    """``reserve_blocks`` failing while ``refuse[0]``: at file creation and as the CommitLog's
    writer reserves ahead."""
    real = mapped_file.reserve_blocks

    def reserve(fd: int, size: int, offset: int = 0) -> None:
        if refuse[0] and size > 0:
            raise OSError(errno_value, os.strerror(errno_value))
        real(fd, size, offset)
    return reserve


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(["single", "batch", "run"]), min_size=4, max_size=40),
       full_at=st.lists(st.booleans(), min_size=40, max_size=40),
       code=st.sampled_from([errno.ENOSPC, errno.EMFILE]))
async def test_refused_file_creation_changes_nothing(tmp_path_factory: pytest.TempPathFactory,
                                                     monkeypatch: pytest.MonkeyPatch, kinds: list[str],
                                                     full_at: list[bool], code: int) -> None:
    """Puts of every kind while file creation fails now and then: each is either acknowledged and
    read back at its queue offset, or refused with nothing stored (no queue offset taken, no
    record in the log), before and after a restart."""
    root = str(tmp_path_factory.mktemp("full"))
    refuse = [False]
    monkeypatch.setattr(mapped_file, "reserve_blocks", _refusing(code, refuse))
    # ConsumeQueue files of 5 units and CommitLog files of 4 KiB: most puts need a new file.
    cfg = small_config(root, mappedFileSizeConsumeQueue=100, mappedFileSizeCommitLog=4096,
                       messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    acked: dict[tuple[int, int], bytes] = {}
    seq = 0
    for kind, full in zip(kinds, full_at, strict=False):
        refuse[0] = full
        qid = seq % 3
        max_before, queued_before = store.get_max_phy_offset(), dict(store.commit_log.topic_queue_table)
        bodies = [f"m{seq + i}".encode() * 20 for i in range(3 if kind != "single" else 1)]
        if kind == "single":
            r = store.append_message(message("Full", bodies[0], queue_id=qid))
        elif kind == "batch":
            r = store.append_messages(batch("Full", bodies, queue_id=qid))
        else:
            r = store.append_run([("Full", qid, b, 0, b"", 0, 0, 0, 0, 0) for b in bodies], STORE_HOST, STORE_HOST)
        seq += len(bodies)
        if r.ok:
            assert r.append_result is not None
            for i, body in enumerate(bodies):
                acked[(qid, r.append_result.logics_offset + i)] = body
        else:
            expected = PutMessageStatus.SERVICE_NOT_AVAILABLE if code == errno.ENOSPC else \
                PutMessageStatus.CREATE_MAPEDFILE_FAILED
            assert r.status == expected and r.remark, r
            assert store.get_max_phy_offset() == max_before and store.commit_log.topic_queue_table == queued_before
            store.disk_full = False  # the disk is not really full: let the next put try again
            store.clean_commit_log_service.space_needed = 0
    refuse[0] = False
    for restart in (False, True):
        if restart:
            store = await restarted(store)
        for (qid, offset), body in acked.items():
            got = store.get_message("g", "Full", qid, offset, 1)
            assert got.status == GetMessageStatus.FOUND, (qid, offset, got.status, restart)
            assert body in got.buffers[0]
        for qid in range(3):
            assert store.get_max_offset_in_queue("Full", qid) == len([k for k in acked if k[0] == qid])
    await store.shutdown()


async def test_many_small_files_hold_few_descriptors(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the mapping budget, full and flushed files are unmapped and mapped again when read."""
    mappings = mapped_file._Mappings()
    mappings.limit = 64
    mappings._next_scan = 64
    monkeypatch.setattr(mapped_file, "MAPPINGS", mappings)
    cfg = small_config(str(tmp_path), mappedFileSizeConsumeQueue=100, mappedFileSizeCommitLog=4096)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    for i in range(600):  # 120 ConsumeQueue files per queue, ~100 CommitLog files
        assert store.append_message(message("Small", b"x" * 100, queue_id=i % 5)).ok
        if i % 50 == 0:
            store._flush_all()
    store._flush_all()
    assert store.append_message(message("Small", b"y", queue_id=0)).ok  # a new mapping: over budget, released
    assert len(mappings.open) <= 64 + 64 // 8 + 10, len(mappings.open)
    for i in range(600):
        got = store.get_message("g", "Small", i % 5, i // 5, 1)
        assert got.status == GetMessageStatus.FOUND, (i, got.status)
    await store.shutdown()
    assert not mappings.open
    store = DefaultMessageStore(cfg)  # loaded lazily: only the files being written are mapped
    await store.load()
    assert len(mappings.open) <= 64 + 64 // 8 + 10, len(mappings.open)
    assert store.get_message("g", "Small", 3, 0, 1).status == GetMessageStatus.FOUND
    await store.start()
    await store.shutdown()


async def test_the_commit_log_reserves_ahead_of_its_writer(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 128 MiB CommitLog file is reserved a part at a time, always as far as its pages are
    warmed ahead of the writer (no page made writable before its blocks are reserved); when the
    next reservation fails, the put is refused with nothing written, and the next put after the
    disk has room is accepted."""
    refuse = [False]
    monkeypatch.setattr(mapped_file, "reserve_blocks", _refusing(errno.ENOSPC, refuse))
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=128 << 20, messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    try:
        body = b"r" * 4000
        assert store.append_message(message("Ahead", body)).ok
        mf = store.commit_log.queue.files[-1]
        assert 0 < mf.reserved < mf.file_size, "the whole file was reserved at once"
        refuse[0] = True
        stored = 1
        for _ in range(40_000):  # bounded: 128 MiB holds 32,000 of these
            before = store.get_max_phy_offset()
            r = store.append_message(message("Ahead", body))
            if not r.ok:
                break
            stored += 1
            assert store.get_max_phy_offset() <= mf.reserved, "written past the reservation"
            assert mf.warm_requested <= mf.reserved, "warmed past the reservation"
        assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk is full" in (r.remark or ""), r
        assert store.get_max_phy_offset() == before and store.get_max_offset_in_queue("Ahead", 0) == stored
        refuse[0] = False  # room again: the very next put is accepted
        r = store.append_message(message("Ahead", body))
        assert r.ok and r.append_result is not None and r.append_result.logics_offset == stored
        assert store.get_message("g", "Ahead", 0, stored, 1).status == GetMessageStatus.FOUND
    finally:
        await store.shutdown()


async def test_many_queues_written_hold_few_mappings(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the mapping budget, the ConsumeQueue files still being written are released too (one
    per queue: 10,000 topics of 8 queues would otherwise hold 80,000 mappings), their next units
    written without mapping them again, and nothing written to a released file is lost, before or
    after a restart."""
    mappings = mapped_file._Mappings()
    mappings.limit = 64
    mappings._next_scan = 64
    monkeypatch.setattr(mapped_file, "MAPPINGS", mappings)
    cfg = small_config(str(tmp_path), messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    topics = [f"Wide{t}" for t in range(50)]
    for rnd in range(3):  # 200 queues, each written again after its mapping was released
        for t, topic in enumerate(topics):
            for qid in range(4):
                assert store.append_message(message(topic, f"{t}-{qid}-{rnd}".encode(), queue_id=qid)).ok
        assert len(mappings.open) <= 64 + 64 // 8 + 4, len(mappings.open)
    written_unmapped = [cq for qs in store.consume_queue_table.values() for cq in qs.values()
                        if not cq.queue.files[-1].mapped]
    assert written_unmapped, "a released file's next unit is written without mapping it again"
    cq = store.consume_queue_store.existing("Wide0", 0)
    assert cq is not None and not cq.queue.files[-1].is_full
    for restart in (False, True):
        if restart:
            store = await restarted(store)
        for t, topic in enumerate(topics):
            for qid in range(4):
                assert store.get_max_offset_in_queue(topic, qid) == 3
                got = store.get_message("g", topic, qid, 0, 3)
                assert got.status == GetMessageStatus.FOUND and len(got.buffers) == 3, (topic, qid, restart)
                assert all(f"{t}-{qid}-{rnd}".encode() in buf for rnd, buf in enumerate(got.buffers))
    await store.shutdown()


async def test_a_consume_queue_reserves_ahead_of_its_writer(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 6,000,000-byte ConsumeQueue file holds the disk of its first units, not all of it; when
    the reservation of its next chunk fails, the put is refused with nothing stored, and accepted
    once the disk has room."""
    refuse = [False]
    monkeypatch.setattr(mapped_file, "reserve_blocks", _refusing(errno.ENOSPC, refuse))
    cfg = small_config(str(tmp_path), mappedFileSizeConsumeQueue=6_000_000, messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    try:
        assert store.append_message(message("Chunked", b"c")).ok
        cq = store.consume_queue_store.existing("Chunked", 0)
        assert cq is not None
        mf = cq.queue.files[-1]
        assert 0 < mf.reserved < mf.file_size, "the whole file was reserved at once"
        if hasattr(os, "posix_fallocate"):
            assert os.stat(mf.path).st_blocks * 512 <= 4 * mf.reserved, "blocks held beyond the reservation"
        refuse[0] = True
        stored = 1
        for _ in range(10_000):  # bounded: the first chunk holds fewer units than this
            before = store.get_max_phy_offset()
            r = store.append_message(message("Chunked", b"c"))
            if not r.ok:
                break
            stored += 1
            assert stored * 20 <= mf.reserved, "a unit written past the reservation"
        assert not r.ok and r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE, r
        assert store.get_max_phy_offset() == before and store.get_max_offset_in_queue("Chunked", 0) == stored
        refuse[0] = False
        r = store.append_message(message("Chunked", b"c"))
        assert r.ok and r.append_result is not None and r.append_result.logics_offset == stored
        assert store.get_message("g", "Chunked", 0, stored, 1).status == GetMessageStatus.FOUND
    finally:
        await store.shutdown()


async def test_single_puts_keep_their_consume_queue_units_within_its_reservation(tmp_path: str) -> None:
    """Every unit a single put writes lies in blocks reserved before its record was appended (so
    a full disk refuses the put rather than leaving an acknowledged record with no unit), past the
    first chunk too: 2,000 units are 40,000 bytes, two chunks and more."""
    cfg = small_config(str(tmp_path), mappedFileSizeConsumeQueue=6_000_000, messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    try:
        for i in range(2000):
            assert store.append_message(message("Chunked", b"c")).ok
            cq = store.consume_queue_store.existing("Chunked", 0)
            assert cq is not None
            mf = cq.queue.files[-1]
            assert mf.wrote_position <= mf.reserved < mf.file_size, f"unit {i} past the reservation"
    finally:
        await store.shutdown()
