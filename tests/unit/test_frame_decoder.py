"""Frame decoder limits and typed headers."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from rocketmq_py.remoting import (
    CommandHeader,
    FrameDecoder,
    FrameError,
    HeaderError,
    Int32,
    Int64,
    RemotingCommand,
    encode_frame,
    wire,
)


def test_size_guard_rejects_before_buffering() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameError, match="frame length"):
        decoder.feed(struct.pack(">iI", 2000, 0))


def test_partial_frame_is_held_until_complete() -> None:
    frame = encode_frame(RemotingCommand.request(10, {"a": "b"}, b"x" * 100))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:50]) == []
    assert decoder.buffered == 50
    (cmd,) = decoder.feed(frame[50:])
    assert cmd.body == b"x" * 100 and decoder.buffered == 0
    assert type(cmd.body) is bytes, "a body cut from the held buffer is its own bytes"


def test_many_frames_in_one_chunk_keep_order() -> None:
    cmds = [RemotingCommand.request(10, {"i": str(i)}) for i in range(100)]
    out = FrameDecoder().feed(b"".join(encode_frame(c) for c in cmds))
    assert [c.ext_fields for c in out] == [{"i": str(i)} for i in range(100)]


@dataclass
class PullHeader(CommandHeader):
    consumerGroup: str
    queueId: Int32
    queueOffset: Int64
    sysFlag: Int32
    subscription: str | None = None
    unitMode: bool | None = None


@dataclass
class SendHeaderV2(CommandHeader):
    producerGroup: str = wire("a")
    topic: str = wire("b")
    batch: bool | None = wire("m", None)


def test_typed_header_parses_and_writes_java_strings() -> None:
    h = PullHeader.from_ext_fields({"consumerGroup": "g", "queueId": "3", "queueOffset": "17",
                                    "sysFlag": "2", "unitMode": "TRUE", "extra": "ignored"})
    assert h == PullHeader("g", 3, 17, 2, None, True)
    assert h.to_ext_fields() == {"consumerGroup": "g", "queueId": "3", "queueOffset": "17",
                                 "sysFlag": "2", "unitMode": "true"}


def test_typed_header_wire_names() -> None:
    h = SendHeaderV2.from_ext_fields({"a": "pg", "b": "T", "m": "true"})
    assert (h.producerGroup, h.topic, h.batch) == ("pg", "T", True)
    assert h.to_ext_fields() == {"a": "pg", "b": "T", "m": "true"}


def test_typed_header_missing_and_bad_fields_name_the_field() -> None:
    with pytest.raises(HeaderError, match="<queueId> is null"):
        PullHeader.from_ext_fields({"consumerGroup": "g", "queueOffset": "1", "sysFlag": "0"})
    with pytest.raises(HeaderError, match="<queueOffset> is not a valid long"):
        PullHeader.from_ext_fields({"consumerGroup": "g", "queueId": "1", "queueOffset": "x", "sysFlag": "0"})


def test_decode_header_from_command() -> None:
    cmd = RemotingCommand.request(11, PullHeader("g", 1, 2, 3))
    assert cmd.ext_fields == {"consumerGroup": "g", "queueId": "1", "queueOffset": "2", "sysFlag": "3"}
    assert cmd.decode_header(PullHeader) == PullHeader("g", 1, 2, 3)
