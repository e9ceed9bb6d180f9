"""Header serializations: JSON (type 0) and ROCKETMQ binary (type 1) byte-compatible with Java
RocketMQ 4.9.8, and msgpack (type 2), this project's own compact form.

Each codec turns a command's header fields into bytes and back; the body never passes through
here (frame.py appends it). Decoders raise ``HeaderDecodeError`` for anything malformed: the
connection that sent it is closed, as Java's decoder does (remoting.md §2).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import msgpack

from remoting.codes import LanguageCode, SerializeType
from remoting.command import RemotingCommand


class HeaderDecodeError(ValueError):
    """The header bytes of a frame cannot be decoded; the connection should be closed."""


_LANG_NAMES: dict[int, str] = {c.value: c.name for c in LanguageCode}
_LANG_CODES: dict[str, int] = {c.name: c.value for c in LanguageCode}

# --- JSON ---------------------------------------------------------------------------------
# fastjson writes top-level keys in alphabetical order with no whitespace and omits nulls; we
# emit the same so a Java peer and a golden vector see identical bytes. Non-ASCII is written raw
# (UTF-8), as fastjson does.
_json_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_json_decode = json.JSONDecoder().decode


def _ext_to_str(value: Any) -> str:
    # The C++ client sends some ext values as JSON numbers or booleans; Java coerces them to
    # their string form and so do we (remoting.md §3).
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
    obj: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        obj["extFields"] = cmd.ext_fields
    obj["flag"] = cmd.flag
    obj["language"] = _LANG_NAMES.get(cmd.language, "OTHER")
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    return _json_encoder.encode(obj).encode()


def decode_json(data: bytes) -> RemotingCommand:
    try:
        obj = _json_decode(data.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise HeaderDecodeError(f"unparsable JSON header: {exc}") from None
    if not isinstance(obj, dict):
        raise HeaderDecodeError("JSON header is not an object")
    try:
        ext = obj.get("extFields")
        if ext is not None:
            if not isinstance(ext, dict):
                raise HeaderDecodeError("extFields is not an object")
            for k, v in ext.items():
                if not isinstance(v, str):
                    ext[k] = _ext_to_str(v)
        language = obj.get("language", "JAVA")
        remark = obj.get("remark")
        cmd = RemotingCommand(
            _as_int(obj.get("code", 0)),
            opaque=_as_int(obj.get("opaque", 0)),
            flag=_as_int(obj.get("flag", 0)),
            remark=remark if remark is None or isinstance(remark, str) else str(remark),
            ext_fields=ext,
            language=_LANG_CODES.get(language, LanguageCode.OTHER) if isinstance(language, str)
            else _as_int(language),
            version=_as_int(obj.get("version", 0)),
            serialize_type=SerializeType.JSON,
        )
    except (TypeError, ValueError) as exc:
        raise HeaderDecodeError(f"bad JSON header field: {exc}") from None
    return cmd


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


def decode_rocketmq(data: bytes) -> RemotingCommand:
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
_packb = msgpack.Packer(use_bin_type=True).pack


def encode_msgpack(cmd: RemotingCommand) -> bytes:
    return _packb((cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields))


def decode_msgpack(data: bytes) -> RemotingCommand:
    try:
        code, language, version, opaque, flag, remark, ext = msgpack.unpackb(data, raw=False)
        if not (isinstance(code, int) and isinstance(opaque, int) and isinstance(flag, int)
                and isinstance(language, int) and isinstance(version, int)):
            raise TypeError("non-integer header field")
        if remark is not None and not isinstance(remark, str):
            raise TypeError("remark is not a string")
        if ext is not None and (not isinstance(ext, dict)
                                or not all(isinstance(k, str) and isinstance(v, str) for k, v in ext.items())):
            raise TypeError("extFields is not a string map")
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise HeaderDecodeError(f"bad msgpack header: {exc}") from None
    return RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
                           language=language, version=version, serialize_type=SerializeType.MSGPACK)


ENCODERS: dict[int, Callable[[RemotingCommand], bytes]] = {
    SerializeType.JSON: encode_json,
    SerializeType.ROCKETMQ: encode_rocketmq,
    SerializeType.MSGPACK: encode_msgpack,
}
DECODERS: dict[int, Callable[[bytes], RemotingCommand]] = {
    SerializeType.JSON: decode_json,
    SerializeType.ROCKETMQ: decode_rocketmq,
    SerializeType.MSGPACK: decode_msgpack,
}
