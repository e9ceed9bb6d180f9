"""IndexFile's entries, slots and header as RocketMQ's IndexFile.putKey writes them
(docs/store-formats.md#indexfile), against a plain reference writer of one entry at a time."""

from __future__ import annotations

import os
import struct
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.store.index_file import IndexFile, IndexService

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
