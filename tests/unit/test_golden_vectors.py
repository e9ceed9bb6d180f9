"""Golden byte vectors built by hand from docs/protocol.md's layouts, independent of our encoder."""

from __future__ import annotations

import struct

import msgpack
import pytest

from rocketmq_py.remoting import FrameDecoder, LanguageCode, RemotingCommand, SerializeType, encode_frame
from rocketmq_py.remoting.frame import FrameError


def _frame(stype: int, header: bytes, body: bytes = b"") -> bytes:
    # int32 totalLength (4 + header + body) | int32 (type << 24 | headerLength) | header | body
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def _roundtrip(frame: bytes) -> RemotingCommand:
    (cmd,) = FrameDecoder().feed(frame)
    assert encode_frame(cmd) == frame
    return cmd


def test_json_request_vector() -> None:
    # A Java 4.9.8 client's GET_ROUTEINFO_BY_TOPIC: fastjson, keys sorted, no whitespace.
    header = (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
              b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')
    cmd = _roundtrip(_frame(0, header))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (105, 7, 0, 409)
    assert cmd.language == LanguageCode.JAVA
    assert cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.remark is None and cmd.body is None
    assert not cmd.is_response and not cmd.is_oneway
    assert cmd.serialize_type == SerializeType.JSON


def test_json_response_vector_with_body_and_remark() -> None:
    header = (b'{"code":17,"flag":1,"language":"JAVA","opaque":42,"remark":"No topic route info",'
              b'"serializeTypeCurrentRPC":"JSON","version":409}')
    body = b'{"x":1}'
    cmd = _roundtrip(_frame(0, header, body))
    assert cmd.is_response and cmd.code == 17 and cmd.opaque == 42
    assert cmd.remark == "No topic route info" and cmd.body == body and cmd.ext_fields is None


def _rocketmq_header(code: int, lang: int, version: int, opaque: int, flag: int,
                     remark: bytes, ext: list[tuple[bytes, bytes]]) -> bytes:
    ext_block = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return (struct.pack(">hbhii", code, lang, version, opaque, flag)
            + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext_block)) + ext_block)


def test_rocketmq_request_vector() -> None:
    header = _rocketmq_header(11, 0, 409, 1234, 0, b"",
                              [(b"consumerGroup", b"cg1"), (b"topic", b"T"), (b"queueId", b"3")])
    cmd = _roundtrip(_frame(1, header))
    assert cmd.code == 11 and cmd.opaque == 1234 and cmd.serialize_type == SerializeType.ROCKETMQ
    assert cmd.ext_fields == {"consumerGroup": "cg1", "topic": "T", "queueId": "3"}
    assert cmd.remark is None


def test_rocketmq_response_vector() -> None:
    header = _rocketmq_header(0, 0, 409, 99, 1, b"ok",
                              [(b"msgId", b"C0A8000100002A9F0000000000001A2B"), (b"queueId", b"2")])
    body = bytes(range(50))
    cmd = _roundtrip(_frame(1, header, body))
    assert cmd.is_response and cmd.remark == "ok" and cmd.body == body
    assert cmd.ext_fields == {"msgId": "C0A8000100002A9F0000000000001A2B", "queueId": "2"}


def test_cpp_numeric_ext_values_become_strings() -> None:
    header = (b'{"code":11,"extFields":{"queueId":0,"maxMsgNums":32,"unitMode":false},'
              b'"flag":0,"language":"CPP","opaque":1,"version":0}')
    (cmd,) = FrameDecoder().feed(_frame(0, header))
    assert cmd.ext_fields == {"queueId": "0", "maxMsgNums": "32", "unitMode": "false"}
    assert cmd.language == LanguageCode.CPP


def test_msgpack_ext_values_are_coerced_as_json_ones_are() -> None:
    header = msgpack.packb((11, 3, 409, 1, 0, None, {"queueId": 0, "unitMode": False, "batch": None, "t": "x"}))
    (cmd,) = FrameDecoder().feed(_frame(2, header))
    assert cmd.ext_fields == {"queueId": "0", "unitMode": "false", "batch": "", "t": "x"}
    assert cmd.serialize_type == SerializeType.MSGPACK and cmd.language == LanguageCode.PYTHON


def test_msgpack_binary_ext_value_is_refused() -> None:
    header = msgpack.packb((11, 3, 409, 1, 0, None, {"queueId": b"\x00"}), use_bin_type=True)
    with pytest.raises(FrameError, match="binary"):
        FrameDecoder().feed(_frame(2, header))
