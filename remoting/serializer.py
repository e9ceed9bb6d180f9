"""Header serializations: JSON (type 0) and ROCKETMQ binary (type 1) byte-compatible with Java
RocketMQ 4.9.8, and msgpack (type 2), this project's own compact form.

Each codec turns a command's header fields into bytes and back; the body never passes through
here (frame.py appends it). Decoders raise ``HeaderDecodeError`` for anything malformed: the
connection that sent it is closed, as Java's decoder does (docs/protocol.md#frame-layout).
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
import struct
from collections.abc import Callable
from typing import Any

import msgpack

from rocketmq_py.remoting.codes import LanguageCode, SerializeType
from rocketmq_py.remoting.command import RemotingCommand


class HeaderDecodeError(ValueError):
    """The header bytes of a frame cannot be decoded; the connection should be closed."""


_LANG_NAMES: dict[int, str] = {c.value: c.name for c in LanguageCode}
_LANG_CODES: dict[str, int] = {c.name: c.value for c in LanguageCode}
# Every decoded header names its serialization; an Enum member read from its class costs 0.1 µs.
_JSON, _MSGPACK = SerializeType.JSON, SerializeType.MSGPACK

# --- JSON ---------------------------------------------------------------------------------
# fastjson writes top-level keys in alphabetical order with no whitespace and omits nulls; we
# emit the same so a Java peer and a golden vector see identical bytes. Non-ASCII is written raw
# (UTF-8), as fastjson does. This is the hottest code of every daemon, so the C scanner and C
# encoder of the stdlib json module are called directly, skipping the wrappers' per-call set-up
# (a new encoder object and two regex matches per call cost more than the parse itself).
# type-ignored: the C accelerators are not in typeshed
_scan = json.scanner.c_make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]
_encode_map = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, None, json.encoder.encode_basestring, None, ":", ",", False, False, True)
_encode_str = json.encoder.encode_basestring
_WHITESPACE = " \t\n\r"


def _ext_to_str(value: Any) -> str:
    # The C++ client sends some ext values as JSON numbers or booleans; Java coerces them to
    # their string form and so do we (docs/protocol.md#json-header).
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"))


def encode_json(cmd: RemotingCommand) -> bytes:
    ext = cmd.ext_fields
    remark = cmd.remark
    ext_part = "" if ext is None else ',"extFields":' + "".join(_encode_map(ext, 0))
    remark_part = "" if remark is None else ',"remark":' + _encode_str(remark)
    language = _LANG_NAMES.get(cmd.language, "OTHER")
    return (f'{{"code":{cmd.code:d}{ext_part},"flag":{cmd.flag:d},"language":"{language}",'
            f'"opaque":{cmd.opaque:d}{remark_part},"serializeTypeCurrentRPC":"JSON","version":{cmd.version:d}}}'
            ).encode()


def decode_json(data: bytes | bytearray) -> RemotingCommand:
    try:
        text = data.decode()
        obj, end = _scan(text, 0)
    except StopIteration:
        raise HeaderDecodeError("JSON header is empty or not JSON") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise HeaderDecodeError(f"unparsable JSON header: {exc}") from None
    if end != len(text) and text[end:].strip(_WHITESPACE):
        raise HeaderDecodeError("trailing data after the JSON header")
    if type(obj) is not dict:
        raise HeaderDecodeError("JSON header is not an object")
    code = obj.get("code", 0)
    opaque = obj.get("opaque", 0)
    flag = obj.get("flag", 0)
    version = obj.get("version", 0)
    try:
        if not (type(code) is int and type(opaque) is int and type(flag) is int and type(version) is int):
            code, opaque, flag, version = _as_int(code), _as_int(opaque), _as_int(flag), _as_int(version)
        ext = obj.get("extFields")
        if ext is not None:
            if type(ext) is not dict:
                raise TypeError("extFields is not an object")
            for k, v in ext.items():
                if type(v) is not str:
                    ext[k] = _ext_to_str(v)
        remark = obj.get("remark")
        if remark is not None and type(remark) is not str:
            remark = str(remark)
        language = obj.get("language", "JAVA")
        language = _LANG_CODES.get(language, LanguageCode.OTHER) if type(language) is str else _as_int(language)
    except (TypeError, ValueError) as exc:
        raise HeaderDecodeError(f"bad JSON header field: {exc}") from None
    return RemotingCommand(code, opaque, flag, remark, ext, None, language, version, _JSON)


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


# --- ROCKETMQ binary ----------------------------------------------------------------------
_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLength
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def encode_rocketmq(cmd: RemotingCommand) -> bytes:
    remark = cmd.remark.encode() if cmd.remark else b""
    parts = [_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, len(remark)), remark]
    ext = b""
    if cmd.ext_fields:
        chunks = []
        for k, v in cmd.ext_fields.items():
            if k is None or v is None:
                continue
            kb, vb = k.encode(), v.encode()
            chunks.append(_I16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb)
        ext = b"".join(chunks)
    parts.append(_I32.pack(len(ext)))
    parts.append(ext)
    return b"".join(parts)


def decode_rocketmq(data: bytes | bytearray) -> RemotingCommand:
    n = len(data)
    if n < 21:
        raise HeaderDecodeError(f"ROCKETMQ header too short: {n} bytes (minimum 21)")
    code, language, version, opaque, flag, remark_len = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > n:
        raise HeaderDecodeError(f"ROCKETMQ remark length {remark_len} exceeds the header")
    try:
        remark = data[pos:pos + remark_len].decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _I32.unpack_from(data, pos)
        pos += 4
        if ext_len < 0 or pos + ext_len > n:
            raise HeaderDecodeError(f"ROCKETMQ ext length {ext_len} exceeds the header")
        ext: dict[str, str] | None = None
        if ext_len:
            ext = {}
            end = pos + ext_len
            while pos < end:
                if pos + 2 > end:
                    raise HeaderDecodeError("ROCKETMQ ext entry truncated")
                (klen,) = _I16.unpack_from(data, pos)
                pos += 2
                if klen < 0 or pos + klen + 4 > end:
                    raise HeaderDecodeError("ROCKETMQ ext key length exceeds the ext block")
                key = data[pos:pos + klen].decode()
                pos += klen
                (vlen,) = _I32.unpack_from(data, pos)
                pos += 4
                if vlen < 0 or pos + vlen > end:
                    raise HeaderDecodeError("ROCKETMQ ext value length exceeds the ext block")
                value = data[pos:pos + vlen].decode()
                pos += vlen
                # Java decodes a 0-length key or value as null and its encoder skips nulls.
                if key and value:
                    ext[key] = value
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"ROCKETMQ header holds invalid UTF-8: {exc}") from None
    return RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
                           language=language & 0xFF, version=version,
                           serialize_type=SerializeType.ROCKETMQ)


# --- msgpack (our own) --------------------------------------------------------------------
_packb: Callable[[object], bytes] = msgpack.Packer(use_bin_type=True).pack
_unpackb = msgpack.unpackb


def encode_msgpack(cmd: RemotingCommand) -> bytes:
    return _packb((cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields))


def decode_msgpack(data: bytes | bytearray) -> RemotingCommand:
    try:
        # strict_map_key (the default) already refuses non-string map keys.
        code, language, version, opaque, flag, remark, ext = _unpackb(data, raw=False, use_list=False)
        if not (type(code) is int and type(opaque) is int and type(flag) is int
                and type(language) is int and type(version) is int):
            raise TypeError("non-integer header field")
        if remark is not None and type(remark) is not str:
            raise TypeError("remark is not a string")
        if ext is not None:
            if type(ext) is not dict:
                raise TypeError("extFields is not a map")
            for k, v in ext.items():
                if type(v) is not str:
                    if type(v) is bytes:
                        raise TypeError("extFields holds a binary value")
                    ext[k] = _ext_to_str(v)  # as the JSON decoder does for numbers and booleans
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise HeaderDecodeError(f"bad msgpack header: {exc}") from None
    return RemotingCommand(code, opaque, flag, remark, ext, None, language, version, _MSGPACK)


ENCODERS: dict[int, Callable[[RemotingCommand], bytes]] = {
    SerializeType.JSON: encode_json,
    SerializeType.ROCKETMQ: encode_rocketmq,
    SerializeType.MSGPACK: encode_msgpack,
}
DECODERS: dict[int, Callable[[bytes | bytearray], RemotingCommand]] = {
    SerializeType.JSON: decode_json,
    SerializeType.ROCKETMQ: decode_rocketmq,
    SerializeType.MSGPACK: decode_msgpack,
}
