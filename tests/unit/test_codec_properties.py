"""Property tests: every command round-trips through each serialization, under any chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting import FrameDecoder, LanguageCode, RemotingCommand, SerializeType, encode_frame

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
