"""The batch body's two walks (remoting/protocol/batch_body.py) agree on every body, well-formed or
not: the same entries, the same merged properties, the same error for a broken structure and the
same first refusal of ``merge``. The compiled build runs ``walk_by_bytes``, the pure one
``walk_by_struct``; each build's run of this test checks both as that build compiles them."""

from __future__ import annotations

import struct
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.common.build import compiled
from rocketmq_py.remoting.protocol import batch_body
from rocketmq_py.remoting.protocol.batch_body import Merge, StoredEntry, walk_by_bytes, walk_by_struct
from rocketmq_py.remoting.protocol.message import RecordError

INT32 = st.integers(-(2**31), 2**31 - 1)
# Properties mostly of a few lengths, as a batch's are (walk_by_struct reads them by the length of the
# entry before's), with any others between.
ENTRY = st.tuples(INT32, st.binary(max_size=300), st.one_of(
    st.binary(max_size=40), st.sampled_from([b"TAGS\x01a", b"TAGS\x01b", b"KEYS\x01k!", b""])))


def _entry(flag: int, body: bytes, props: bytes) -> bytes:
    return struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, flag, len(body)) + body + \
        struct.pack(">h", len(props)) + props


def _merge(props: bytes) -> tuple[bytes, int]:
    """A caller's merge: refuses properties holding a ``!``, else appends one."""
    if b"!" in props:
        raise RecordError(f"refused {props!r}")
    return props + b"!", len(props)


def _walked(walk: Callable[[bytes, Merge], tuple[list[StoredEntry], RecordError | None]], body: bytes,
            merge: Merge) -> object:
    """What a walk gives for ``body``, bodies as bytes: its entries and refusal, or its error."""
    try:
        entries, refused = walk(body, merge)
    except RecordError as exc:
        return "error", str(exc)
    return [(flag, bytes(data), props, code) for flag, data, props, code in entries], \
        None if refused is None else str(refused)


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
    if how == "whole":  # a well-formed body: every entry, merged unless refused, the first refusal kept
        refusals = [props for _, _, props in entries if b"!" in props]
        assert walked == ([(flag, data, *((props, 0) if b"!" in props else (props + b"!", len(props))))
                           for flag, data, props in entries],
                          f"refused {refusals[0]!r}" if refusals else None)


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
