"""The batch body's two walks (remoting/protocol/batch_body.py) agree on every body, well-formed or
not: the same records, the same merged properties, the same error for a broken structure, the same
first refusal of ``merge`` and of the store. The compiled build runs ``walk_by_bytes``, the pure one
``walk_by_struct``; each build's run of this test checks both as that build compiles them. And the
records a walk builds as it reads are the store's records of the same entries given one by one
(CommitLog._build_batch, itself pinned to encode_record by tests/unit/test_store.py)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.common.build import compiled
from rocketmq_py.remoting.protocol import batch_body
from rocketmq_py.remoting.protocol.batch_body import (
    REFUSED_NUL,
    REFUSED_PROPERTIES_SIZE,
    REFUSED_SIZE,
    Built,
    Maker,
    Merge,
    StoredEntry,
    split_batch,
    walk_by_bytes,
    walk_by_struct,
)
from rocketmq_py.remoting.protocol.message import BATCH_RECORD_HEADS_BY_HOSTS, RecordError
from rocketmq_py.store.commit_log import CommitLog

INT32 = st.integers(-(2**31), 2**31 - 1)
# Properties mostly of a few lengths, as a batch's are (walk_by_struct reads them by the length of the
# entry before's), with any others between (NUL among them: the store refuses it).
ENTRY = st.tuples(INT32, st.binary(max_size=300), st.one_of(
    st.binary(max_size=40), st.sampled_from([b"TAGS\x01a", b"TAGS\x01b", b"KEYS\x01k!", b""])))
Walk = Callable[[bytes, Merge, Maker], tuple[Built, RecordError | None]]


def _maker(max_body: int = 200, queue_offset: int = 5) -> Maker:
    """A store's maker (CommitLog.batch_maker) for IPv4 hosts, a topic ``T``, bodies up to ``max_body``."""
    head, shared_head = BATCH_RECORD_HEADS_BY_HOSTS[8, 8]
    shared = shared_head.pack(0, 1700000000123, bytes(8), 1700000000456, bytes(8), 0, 0)
    return Maker(head.pack, shared, 3, 4096, queue_offset, 1, b"\x01T", 80, max_body, b"KEY", 1700000000456, 0)


def _entry(flag: int, body: bytes, props: bytes) -> bytes:
    return struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, flag, len(body)) + body + \
        struct.pack(">h", len(props)) + props


def _merge(props: bytes) -> tuple[bytes, int]:
    """A caller's merge: refuses properties holding a ``!``, else appends one."""
    if b"!" in props:
        raise RecordError(f"refused {props!r}")
    return props + b"!", len(props)


def _records(built: Built) -> tuple[bytes, list[int], int, bool, int]:
    """Records as the store writes them: their parts joined."""
    parts, fields, size, keyless, refusal = built
    return b"".join(parts), fields, size, keyless, refusal


def _walked(walk: Walk, body: bytes, merge: Merge, maker: Maker | None = None
            ) -> tuple[tuple[bytes, list[int], int, bool, int], str | None] | tuple[str, str]:
    """What a walk gives for ``body``: its records and refusal, or its error."""
    try:
        built, refused = walk(body, merge, maker or _maker())
    except RecordError as exc:
        return "error", str(exc)
    return _records(built), None if refused is None else str(refused)


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(ENTRY, max_size=10), cut=st.integers(0, 4000), spot=st.integers(0, 4000),
       byte=st.integers(0, 255), tail=st.binary(max_size=30),
       how=st.sampled_from(["whole", "cut", "changed", "tail"]))
def test_both_walks_read_every_body_alike(entries: list[tuple[int, bytes, bytes]], cut: int, spot: int, byte: int,
                                          tail: bytes, how: str) -> None:
    body = b"".join(_entry(*e) for e in entries)
    if how == "cut":
        body = body[:cut % (len(body) + 1)]
    elif how == "changed" and body:
        at = spot % len(body)
        body = body[:at] + bytes((byte,)) + body[at + 1:]
    elif how == "tail":
        body += tail
    walked = _walked(walk_by_struct, body, _merge)
    assert _walked(walk_by_bytes, body, _merge) == walked
    if how == "whole":
        # A well-formed body: every entry, merged unless refused, the first refusal kept; the
        # records the store builds of those entries one by one, or its first refusal.
        refusals = [props for _, _, props in entries if b"!" in props]
        stored: list[StoredEntry] = [(flag, data, *((props, 0) if b"!" in props else (props + b"!", len(props))))
                                     for flag, data, props in entries]
        built = _records(CommitLog._build_batch(stored, _maker()))
        assert isinstance(walked, tuple)
        records, refused = walked
        assert refused == (f"refused {refusals[0]!r}" if refusals else None)
        assert records[4] == built[4]
        if not built[4]:
            assert records == built
        assert [(flag, bytes(data), props) for flag, data, props in split_batch(body)] == entries


def test_the_build_walks_the_way_it_runs_fastest() -> None:
    assert batch_body.split_batch_merged is (walk_by_bytes if compiled() else walk_by_struct)


def test_both_walks_read_alike_entries_of_one_properties_length_cut_or_changed_anywhere() -> None:
    """walk_by_struct reads an entry's properties by the length of the entry before's: every cut and
    every byte changed (its total size, lengths, properties) is read as walk_by_bytes reads it."""
    body = b"".join(_entry(i, bytes((i,)) * (i * 7 % 30), b"TAGS\x01" + bytes((97 + i % 2,))) for i in range(6))
    for at in range(len(body) + 1):
        assert _walked(walk_by_struct, body[:at], _merge) == _walked(walk_by_bytes, body[:at], _merge)
    for at in range(len(body)):
        for byte in (0, 1, 6, 0x7F, 0x80, 0xFF):
            changed = body[:at] + bytes((byte,)) + body[at + 1:]
            assert _walked(walk_by_struct, changed, _merge) == _walked(walk_by_bytes, changed, _merge)


@pytest.mark.parametrize("walk", [walk_by_struct, walk_by_bytes])
@pytest.mark.parametrize(("entries", "refusal"), [
    ([(0, b"x" * 201, b"A\x01a")], REFUSED_SIZE),
    ([(0, b"x", b"A\x01a"), (0, b"x" * 201, b"A\x01\x00")], REFUSED_SIZE),
    ([(0, b"x", b"A\x01\x00"), (0, b"x" * 201, b"A\x01a")], REFUSED_NUL),
    ([(0, b"x" * 201, b"A\x01\x00")], REFUSED_SIZE),
    ([(0, b"x", b"a" * 32767), (0, b"x", b"A\x01\x00")], REFUSED_PROPERTIES_SIZE),
    ([(0, b"x", b"\x00" + b"a" * 32766)], REFUSED_NUL),
    ([(0, b"x", b"a" * 32767), (0, b"x", b"a" * 32767)], REFUSED_PROPERTIES_SIZE),
    ([(0, b"x", b"a" * 32766)], 0),
])
def test_a_walk_s_first_refusal_is_the_store_s(walk: Walk, entries: list[tuple[int, bytes, bytes]],
                                               refusal: int) -> None:
    """A body too large, properties holding NUL or longer than an int16 holds, as merged: the
    walk reports the store's first refusal (CommitLog._build_batch's, entry by entry), and the
    whole body is still walked for its structure."""
    body = b"".join(_entry(*e) for e in entries)
    (_, _, _, _, found), refused = walk(body, _merge, _maker())
    stored: list[StoredEntry] = [(flag, data, props + b"!", len(props)) for flag, data, props in entries]
    assert found == refusal == CommitLog._build_batch(stored, _maker())[4]
    assert refused is None
    with pytest.raises(RecordError):
        walk(body + b"\x00", _merge, _maker())
