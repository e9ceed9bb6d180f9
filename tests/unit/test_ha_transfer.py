"""The HA port's byte streams (store/ha/transfer.py), cut at every possible place."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.store.ha.transfer import FrameReader, ReportReader, TransferProtocolError

frames_st = st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300)), max_size=12)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


@given(frames_st, st.lists(st.integers(0, 10_000), max_size=20))
def test_frames_survive_any_cut(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    wire = b"".join(struct.pack(">qi", offset, len(body)) + body for offset, body in frames)
    reader = FrameReader()
    got = []
    for piece in _cut(wire, cuts):
        got += reader.feed(piece)
    assert got == frames


@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=10), st.lists(st.integers(0, 1000), max_size=10))
def test_reports_last_whole_offset_wins(offsets: list[int], cuts: list[int]) -> None:
    wire = b"".join(struct.pack(">q", o) for o in offsets)
    reader = ReportReader()
    seen = [r for piece in _cut(wire, cuts) if (r := reader.feed(piece)) is not None]
    assert seen and seen[-1] == offsets[-1]
    assert all(s in offsets for s in seen)


@given(st.integers(-(2**31), -1) | st.integers(4 * 1024 * 1024, 2**31 - 1))
def test_a_size_no_master_sends_is_refused(size: int) -> None:
    with pytest.raises(TransferProtocolError):
        FrameReader().feed(struct.pack(">qi", 0, size))
