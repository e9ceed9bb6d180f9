"""IndexFile's entries, slots and header as RocketMQ's IndexFile.putKey writes them
(docs/store-formats.md#indexfile), against a plain reference writer of one entry at a time."""

from __future__ import annotations

import errno
import functools
import os
import struct
import tempfile
import time
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.store.index_file import IndexFile, IndexService, index_file_name

_HEADER_SIZE, _SLOT_SIZE, _ENTRY_SIZE = 40, 4, 20


def reference(entries: list[tuple[int, int, int]], slot_num: int, index_num: int, start_ts: int,
              seeded: dict[int, int]) -> bytes:
    """A new file's bytes after putKey of each entry in turn (it fits: fewer than index_num), its
    begin timestamp at first ``start_ts`` (the previous file's end, as IndexService makes it) and
    its slots at first ``seeded``'s values (a corrupt file's)."""
    data = bytearray(_HEADER_SIZE + slot_num * _SLOT_SIZE + index_num * _ENTRY_SIZE)
    for slot, value in seeded.items():
        struct.pack_into(">i", data, _HEADER_SIZE + slot * _SLOT_SIZE, value)
    if not entries:
        return bytes(data)  # nothing written
    begin_ts = end_ts = start_ts
    begin_phy = end_phy = slot_count = 0
    count = 1
    for h, phy, ts in entries:
        slot_pos = _HEADER_SIZE + (h % slot_num) * _SLOT_SIZE
        (prev,) = struct.unpack_from(">i", data, slot_pos)
        if prev <= 0 or prev > count:
            prev = 0
            slot_count += 1
        diff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), 2**31 - 1)
        struct.pack_into(">iqii", data, _HEADER_SIZE + slot_num * _SLOT_SIZE + count * _ENTRY_SIZE,
                         h, phy, diff, prev)
        struct.pack_into(">i", data, slot_pos, count)
        if count <= 1:
            begin_phy, begin_ts = phy, ts
        end_phy, end_ts = phy, ts
        count += 1
    struct.pack_into(">qqqqii", data, 0, begin_ts, end_ts, begin_phy, end_phy, slot_count, count)
    return bytes(data)


_ENTRIES = st.lists(st.tuples(st.integers(0, 2**31 - 1) | st.integers(0, 40),
                              st.integers(0, 2**40),
                              st.integers(1_700_000_000_000 - 5_000, 1_700_000_000_000 + 5_000)
                              | st.sampled_from([1_700_000_000_000 + (2**31 + 5) * 1000, 0])),
                    max_size=60)


@settings(max_examples=150, deadline=None)
@given(entries=_ENTRIES, slot_num=st.integers(1, 37), cuts=st.lists(st.integers(0, 60), max_size=5),
       start_ts=st.sampled_from([0, 1_700_000_000_000 - 3_000, 1_700_000_000_000 + 3_000]),
       seeded=st.dictionaries(st.integers(0, 36), st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 70),
                              max_size=4))
def test_put_entries_writes_what_put_key_writes_one_by_one(entries: list[tuple[int, int, int]], slot_num: int,
                                                          cuts: list[int], start_ts: int,
                                                          seeded: dict[int, int]) -> None:
    """Entries colliding in few slots, store times before the file's begin, equal, and more than
    2^31 s after it, put in runs cut anywhere, into a file begun fresh or after a full one, slots
    holding stray values (negative, past the entries): the file's bytes are the reference's."""
    seeded = {slot: value for slot, value in seeded.items() if slot < slot_num}
    index_num = 64
    entries.sort(key=lambda e: e[1])
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "i"), slot_num, index_num)
        f.begin_timestamp = f.end_timestamp = start_ts
        for slot, value in seeded.items():
            struct.pack_into(">i", f.mm, _HEADER_SIZE + slot * _SLOT_SIZE, value)
        hashes, phys, stamps = (list(c) for c in zip(*entries, strict=True)) if entries else ([], [], [])
        at = 0
        for cut in [*sorted(c for c in cuts if c < len(entries)), len(entries)]:
            if cut > at:
                assert f.put_entries(hashes[:cut], phys[:cut], stamps[:cut], at) == cut - at
                at = cut
        f.flush()
        with open(f.path, "rb") as written:
            assert written.read() == reference(entries, slot_num, index_num, start_ts, seeded)
        f.mm.close()


def test_a_file_filling_up_hands_the_rest_to_the_next_and_every_key_is_found() -> None:
    with tempfile.TemporaryDirectory() as d:
        service = IndexService(d, 7, 10)
        hashes = [h * 7 + 3 for h in range(25)]  # one slot
        phys = list(range(100, 125))
        service.put_entries(hashes, phys, [1_700_000_000_000 + i * 1000 for i in range(25)])
        assert [f.index_count for f in service.files] == [10, 10, 8]
        for f in service.files:
            f.reload_header()
        found = sorted(p for f in service.files for h in hashes for p in f.select_phy_offset(h, 64, 0, 2**62))
        assert found == phys
        service.close()


def _held(service: IndexService) -> list[tuple[int, int]]:
    """Every (key hash, message offset) entry of the service's files, in their order."""
    entries: list[tuple[int, int]] = []
    for f in service.files:
        with open(f.path, "rb") as data:
            raw = data.read()
        count = struct.unpack_from(">i", raw, 36)[0]
        entries += [struct.unpack_from(">iq", raw, f.entries_pos + n * _ENTRY_SIZE) for n in range(1, count)]
    return entries


def _put_failing_once(service: IndexService, put: Callable[[], None]) -> None:
    """``put`` with the service's first new file failing as on a full disk, then ``put`` again,
    as the index child retries the same records."""
    make = service._last_file

    def fail() -> IndexFile:
        if not service.files or service.files[-1].is_write_full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return make()

    service._last_file = fail  # type: ignore[method-assign]
    try:
        put()
    except OSError:
        pass
    finally:
        del service._last_file  # type: ignore[method-assign]
    put()


@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4), min_size=1, max_size=12),
       index_num=st.integers(3, 8), cuts=st.lists(st.integers(0, 12), max_size=4),
       fail_at=st.sets(st.integers(0, 5), max_size=3), again_from=st.integers(0, 12),
       reload=st.booleans(), orphan=st.booleans())
def test_every_key_is_held_once_whatever_is_dispatched_again(records: list[list[int]], index_num: int,
                                                             cuts: list[int], fail_at: set[int],
                                                             again_from: int, reload: bool, orphan: bool) -> None:
    """Records of one to four keys (some of equal hash, in one record too) put a call each run of
    records, into files of a few entries (a record cut by a file's end); a new file failing once
    before some calls, each then retried whole; then the records from any one on dispatched again,
    by the same service or after a restart (files loaded again, one made and never written left
    newest by name as a crash just after its creation leaves it): each key is held exactly once
    (Java's skip of offsets below the end alone put the last record's again)."""
    entries = [(h, 100 * r) for r, keys in enumerate(records) for h in keys]

    def put(service: IndexService, first: int, stop: int) -> None:
        chosen = [(h, phy) for h, phy in entries if 100 * first <= phy < 100 * stop]
        service.put_entries([h for h, _ in chosen], [phy for _, phy in chosen],
                            [1_700_000_000_000 + phy for _, phy in chosen])

    with tempfile.TemporaryDirectory() as d:
        service = IndexService(d, 3, index_num)
        at = 0
        for n, cut in enumerate([*sorted(c for c in cuts if c < len(records)), len(records)]):
            if cut > at:
                if n in fail_at:
                    _put_failing_once(service, functools.partial(put, service, at, cut))
                else:
                    put(service, at, cut)
                at = cut
        if reload:
            service.close()
            if orphan:
                IndexFile(os.path.join(d, "99991231235959999"), 3, index_num).mm.close()
            service = IndexService(d, 3, index_num)
            service.load(True, 0)
        put(service, min(again_from, len(records)), len(records))
        assert sorted(_held(service)) == sorted(entries)
        service.close()


def test_index_file_names_sort_in_the_order_they_were_made() -> None:
    """Names for milliseconds around second boundaries sort as the milliseconds do: the second and
    the millisecond are one reading (read apart, a second's first milliseconds took the second
    before's name)."""
    second = int(time.mktime((2026, 11, 26, 15, 59, 59, 0, 0, -1))) * 1000
    moments = [second - 1, second, second + 5, second + 999, second + 1000, second + 1004]
    names = [index_file_name(ms) for ms in moments]
    assert names[:3] == ["20261126155958999", "20261126155959000", "20261126155959005"]
    assert sorted(set(names)) == names and names[-1] == "20261126160000004"


def test_a_new_index_file_is_named_after_every_file_held() -> None:
    """A clock set back (or a file named ahead of it) does not name a new file before the files
    the service holds; the order read from the headers agrees after a reload."""
    with tempfile.TemporaryDirectory() as d:
        service = IndexService(d, 3, 3)
        ahead = IndexFile(os.path.join(d, "99991231235959999"), 3, 3)
        service.files.append(ahead)
        service.put_entries([1, 2, 3, 4], [10, 20, 30, 40], [1_700_000_000_000] * 4)
        assert [os.path.basename(f.path) for f in service.files] == ["99991231235959999", "99991231235960000"]
        service.close()
        service.load(True, 0)
        assert service.max_phy_offset == 40 and sorted(_held(service)) == [(1, 10), (2, 20), (3, 30), (4, 40)]
        service.close()
