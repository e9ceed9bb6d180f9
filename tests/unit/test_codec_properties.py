"""Property tests: every command round-trips through each serialization, under any chunking."""

from __future__ import annotations

import ctypes

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting import FrameDecoder, LanguageCode, RemotingCommand, SerializeType, encode_frame, frame

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int16 = st.integers(-(2**15), 2**15 - 1)


@st.composite
def commands(draw: st.DrawFn, stype: int) -> RemotingCommand:
    # ROCKETMQ carries code/version as int16 and decodes empty strings as null
    # (docs/protocol.md#rocketmq-binary-header), so the strategy stays inside what each format can represent.
    small = stype == SerializeType.ROCKETMQ
    return RemotingCommand(
        draw(_int16 if small else _int32),
        opaque=draw(_int32),
        flag=draw(st.sampled_from([0, 1, 2])),
        remark=draw(st.none() | _text),
        ext_fields=draw(st.none() | st.dictionaries(_text, _text, min_size=1, max_size=6)),
        body=draw(st.none() | st.binary(min_size=1, max_size=300)),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(_int16 if small else st.integers(0, 2**31 - 1)),
        serialize_type=stype,
    )


any_command = st.sampled_from(list(SerializeType)).flatmap(commands)


@given(any_command)
def test_round_trip(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    (decoded,) = FrameDecoder().feed(frame)
    assert decoded == cmd
    assert encode_frame(decoded) == frame


@settings(max_examples=120)
@given(st.lists(any_command, min_size=1, max_size=8), st.data())
def test_any_chunking_yields_the_same_commands(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    """Whatever the cuts, and whether frames are held whole until complete or (from
    ``collect_from`` bytes on, here as low as every frame) their bodies collected piece by piece
    once their header is in."""
    stream = b"".join(encode_frame(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    decoder = FrameDecoder(collect_from=data.draw(st.sampled_from([0, 64, 200, 1 << 16])))
    out: list[RemotingCommand] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out.extend(decoder.feed(stream[prev:cut]))
        prev = cut
    assert out == cmds
    assert decoder.buffered == 0


@settings(max_examples=150)
@given(st.lists(st.tuples(st.sampled_from(list(SerializeType)), st.none() | st.binary(min_size=1, max_size=3000)),
                min_size=1, max_size=6),
       st.lists(st.integers(1, 1500), min_size=1, max_size=40), st.sampled_from([0, 500, 2000]))
def test_collected_bodies_under_any_reads(specs: list[tuple[int, bytes | None]], sizes: list[int],
                                          collect_from: int) -> None:
    """Large frames' bodies collected piece by piece (FrameDecoder's collect_from, lowered so
    generated frames reach it) come out whole and in order, whatever the reads' sizes, with the
    frames around them."""
    cmds = [RemotingCommand.request(i, {"n": str(i)}, body) for i, (_, body) in enumerate(specs)]
    for cmd, (stype, _) in zip(cmds, specs, strict=True):
        cmd.serialize_type = stype
    stream = b"".join(encode_frame(c) for c in cmds)
    decoder = FrameDecoder(collect_from=collect_from)
    out: list[RemotingCommand] = []
    at = 0
    for i in range(len(stream)):  # bounded: every read takes at least a byte
        if at >= len(stream):
            break
        size = sizes[i % len(sizes)]
        out.extend(decoder.feed(stream[at:at + size]))
        at += size
    assert out == cmds
    assert decoder.buffered == 0


def _read_into(decoder: FrameDecoder, stream: bytes, at: int, size: int) -> tuple[int, list[RemotingCommand]]:
    """One read as a buffered transport makes it: at most ``size`` bytes of ``stream`` from ``at``
    into the decoder's buffer, then ``buffer_updated``."""
    return _read_into_view(decoder, decoder.get_buffer(), stream, at, size)


def _read_into_view(decoder: FrameDecoder, buf: memoryview, stream: bytes, at: int,
                    size: int) -> tuple[int, list[RemotingCommand]]:
    n = min(len(buf), size, len(stream) - at)
    buf[:n] = stream[at:at + n]
    return at + n, decoder.buffer_updated(n)


# Bodies of every size to 3,000 bytes, the larger ones as often as the small.
_bodies = st.none() | st.binary(min_size=1, max_size=300) | st.integers(300, 3000).flatmap(
    lambda n: st.binary(min_size=n, max_size=n))


@settings(max_examples=150)
@given(st.lists(st.lists(st.tuples(st.sampled_from(list(SerializeType)), _bodies), min_size=1, max_size=5),
                min_size=1, max_size=3),
       st.lists(st.integers(1, 1500), min_size=1, max_size=40), st.sampled_from([0, 500, 2000]),
       st.sampled_from([0, 2500, 1 << 30]), st.booleans())
def test_reads_into_the_decoders_buffers(streams: list[list[tuple[int, bytes | None]]], sizes: list[int],
                                         collect_from: int, budget: int, into_bytes: bool) -> None:
    """Read through ``get_buffer`` / ``buffer_updated`` (asyncio's BufferedProtocol), with large
    bodies read straight into their own storage (the command's bytes, or a bytearray where the
    interpreter's bytes cannot be read into; past the thread's budget, collected from the reads),
    by several connections of one thread in turn (they share its read buffer and its budget):
    each decodes the commands its peer sent, bodies as bytes, holds nothing after, and the budget
    is whole again."""
    taken = getattr(frame._reads, "taken", 0)
    saved, frame.BODY_BUFFER_BUDGET = frame.BODY_BUFFER_BUDGET, budget
    saved_into, frame._new_bytes = frame._new_bytes, frame._new_bytes if into_bytes else None
    try:
        _read_streams(streams, sizes, collect_from)
    finally:
        frame.BODY_BUFFER_BUDGET = saved
        frame._new_bytes = saved_into
    assert getattr(frame._reads, "taken", 0) == taken


@settings(max_examples=30)
@given(st.integers(1 << 16, 3 << 20), st.binary(min_size=1, max_size=64), st.integers(1, 3000),
       st.lists(st.integers(1000, 300_000), min_size=1, max_size=10))
def test_a_large_body_is_read_into_the_commands_bytes(size: int, pattern: bytes, first: int, sizes: list[int]) -> None:
    """A large body whose header came in a read before the rest has its later reads land in the
    storage of the bytes object the command then holds: no copy of the body between the socket and
    the command (CPython, where the decoder finds a bytes object's storage; a 1 MiB send's copy was
    a tenth of the broker's event loop)."""
    assert frame._new_bytes is not None
    body = (pattern * (size // len(pattern) + 1))[:size]
    stream = encode_frame(RemotingCommand.request(10, {"topic": "T"}, body))
    decoder = FrameDecoder()
    at, cmds = _read_into(decoder, stream, 0, 8 + (int.from_bytes(stream[4:8], "big") & 0xFFFFFF) + first)
    assert cmds == []
    got, spans = [], []
    for i in range(len(stream)):  # bounded: every read takes at least a byte
        if at >= len(stream):
            break
        view = decoder.get_buffer()
        spans.append(ctypes.addressof(ctypes.c_char.from_buffer(view)))
        at, cmds = _read_into_view(decoder, view, stream, at, sizes[i % len(sizes)])
        got.extend(cmds)
    (cmd,) = got
    assert cmd.body == body and type(cmd.body) is bytes
    start = id(cmd.body) + bytes.__basicsize__ - 1
    assert all(start <= span < start + len(body) for span in spans)  # every read went into the body itself


def test_the_read_after_a_large_body_is_short() -> None:
    """After a large body, the next read takes at most READ_AFTER_LARGE bytes, so little of a
    next large frame's body goes through the read buffer (copied out of it, then into the body's
    storage) before the rest is read into its storage; the read after that takes READ_SIZE."""
    stream = b"".join(encode_frame(RemotingCommand.request(10, {"n": str(i)}, bytes([i]) * (1 << 20)))
                      for i in range(2)) + encode_frame(RemotingCommand.request(11, {"n": "small"}, b"s" * 6000))
    decoder = FrameDecoder()
    offered, got = [], []
    at = 0
    for _ in range(len(stream)):  # bounded: every read takes at least a byte
        if at >= len(stream):
            break
        view = decoder.get_buffer()
        offered.append(len(view))
        at, cmds = _read_into_view(decoder, view, stream, at, len(view))
        got.extend(cmds)
    assert [c.body for c in got] == [bytes([0]) * (1 << 20), bytes([1]) * (1 << 20), b"s" * 6000]
    head, body_rest, after, body2_rest, small_head, small_rest = offered
    assert head == small_rest == frame.READ_SIZE and after == small_head == frame.READ_AFTER_LARGE
    assert body_rest > (1 << 20) - frame.READ_SIZE and body2_rest > (1 << 20) - frame.READ_AFTER_LARGE


def _read_streams(streams: list[list[tuple[int, bytes | None]]], sizes: list[int], collect_from: int) -> None:
    sent: list[list[RemotingCommand]] = []
    for specs in streams:
        cmds = [RemotingCommand.request(i, {"n": str(i)}, body) for i, (_, body) in enumerate(specs)]
        for cmd, (stype, _) in zip(cmds, specs, strict=True):
            cmd.serialize_type = stype
        sent.append(cmds)
    wires = [b"".join(encode_frame(c) for c in cmds) for cmds in sent]
    decoders = [FrameDecoder(collect_from=collect_from) for _ in wires]
    outs: list[list[RemotingCommand]] = [[] for _ in wires]
    ats = [0] * len(wires)
    for i in range(sum(map(len, wires))):  # bounded: every round reads a byte or more of a stream
        live = [k for k, wire in enumerate(wires) if ats[k] < len(wire)]
        if not live:
            break
        k = live[i % len(live)]
        ats[k], got = _read_into(decoders[k], wires[k], ats[k], sizes[i % len(sizes)])
        # bytes, never a view of the read buffer the next read overwrites (a view equals bytes)
        assert all(type(c.body) is bytes for c in got if c.body is not None)
        outs[k].extend(got)
    assert outs == sent
    assert all(type(c.body) is bytes for out in outs for c in out if c.body is not None)
    assert all(d.buffered == 0 for d in decoders)


def test_a_closed_decoder_gives_its_body_buffer_back() -> None:
    """A connection closed in the middle of a large body returns what its buffer took of the
    thread's budget; a header alone never takes more than the budget allows."""
    taken = getattr(frame._reads, "taken", 0)
    wire = encode_frame(RemotingCommand.request(10, {"a": "b"}, bytes(1 << 20)))
    decoders = [FrameDecoder() for _ in range(100)]
    for d in decoders:  # 100 headers of 1 MiB bodies: 100 MiB declared, 64 MiB budget
        _read_into(d, wire, 0, 1000)
    assert getattr(frame._reads, "taken", 0) - taken <= frame.BODY_BUFFER_BUDGET
    assert sum(d.buffered for d in decoders) < 100 * 1000
    for d in decoders:
        d.close()
        assert d.buffered == 0
    assert getattr(frame._reads, "taken", 0) == taken
