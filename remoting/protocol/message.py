"""The stored message record, byte for byte as RocketMQ 4.9 writes it (docs/store-formats.md#message-record).

The same bytes live in the CommitLog, travel in PULL_MESSAGE / QUERY_MESSAGE / VIEW_MESSAGE_BY_ID
bodies and in CHECK_TRANSACTION_STATE, so store, broker and SDK all use this one codec. Also here:
the properties string, the batch body of SEND_BATCH_MESSAGE as a producer encodes it (batch_body.py
walks it), offset message ids, and Java's String.hashCode for tag codes.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from operator import methodcaller
from typing import AnyStr

try:
    # ISA-L's CRC-32 (python-isal): zlib's checksum, five times faster on a 1 KiB body (0.08
    # against 0.41 µs here), and every stored record's body is summed once on its way in.
    from isal.isal_zlib import crc32 as crc32
except ImportError:  # no isal wheel for this platform
    from zlib import crc32 as crc32

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

# sysFlag bits (docs/store-formats.md#sysflag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
COMPRESSION_ZLIB = 0x300


# The transaction types whose records go into their ConsumeQueue: a prepared (half) or rolled-back
# message stays in the CommitLog only. The one spelling of the rule, fast enough for every put:
# ``sys_flag & TRANSACTION_ROLLBACK_TYPE in QUEUED_TRANSACTION_TYPES``.
QUEUED_TRANSACTION_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class MessageConst:
    """Property keys (docs/store-formats.md#property-keys)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    INSTANCE_ID = "INSTANCE_ID"
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MESSAGE_TYPE = "MSG_TYPE"
    KEY_SEPARATOR = " "


# Java's hash is the string's UTF-16 units read as the digits of a base-31 number (mod 2^32).
# For ASCII each byte c splits into c // 31 and c % 31, so the hash is int(Q "0", 31) +
# int(R, 31) with Q and R made by two C-level translates: ~3x faster than a Python loop, and
# the index hashes two keys on every put.
_DIGITS31 = b"0123456789abcdefghijklmnopqrstu"
_HI31 = bytes(_DIGITS31[c // 31] if c < 128 else 0 for c in range(256))
_LO31 = bytes(_DIGITS31[c % 31] if c < 128 else 0 for c in range(256))


def java_string_hash(s: str) -> int:
    """Java's String.hashCode as a signed 32-bit int (over UTF-16 code units)."""
    if not s:
        return 0
    if s.isascii():
        data = s.encode()
        h = (int(data.translate(_HI31) + b"0", 31) + int(data.translate(_LO31), 31)) & 0xFFFFFFFF
    else:
        h = 0
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (h * 31 + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


_tags_codes: dict[str, int] = {}


def tags_string_to_tags_code(tags: str | None) -> int:
    """The consume-queue tag field of a message: the hash of its whole TAGS string, 0 without.

    Memoized (bounded): a topic has a handful of tags, and this runs on every send.
    """
    if not tags:
        return 0
    code = _tags_codes.get(tags)
    if code is None:
        code = java_string_hash(tags)
        if len(_tags_codes) < 4096:
            _tags_codes[tags] = code
    return code


def properties_to_string(props: dict[str, str]) -> str:
    try:
        # C-level joins; every send builds this string.
        return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, props.items()))
    except TypeError:  # a None value: skipped, as Java skips null values
        return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None)


_SPLIT_NAME_VALUE = methodcaller("split", NAME_VALUE_SEPARATOR)


def _last_value(text: AnyStr, prefix: AnyStr, sep: AnyStr) -> AnyStr | None:
    """The non-empty value after the last whole-name ``prefix`` (name and NAME_VALUE_SEPARATOR),
    as ``string_to_properties`` would keep it (a later entry wins; an empty one is no entry)."""
    end = len(text)
    while (i := text.rfind(prefix, 0, end)) >= 0:
        if i == 0 or text[i - 1:i] == sep:
            start = i + len(prefix)
            j = text.find(sep, start)
            value = text[start:] if j < 0 else text[start:j]
            if value:
                return value
        end = i + len(prefix) - 1
    return None


def find_property(text: str, name: str) -> str | None:
    """One property's value, found without parsing the whole string: the store's index and the
    batch send path read two or three names per record. A whole-name match only (``MYKEYS`` is
    not ``KEYS``); an empty value is no value; of repeated names the last counts, all as in
    ``string_to_properties``."""
    return _last_value(text, name + NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)


_RAW_PROPERTY_SEPARATOR = PROPERTY_SEPARATOR.encode()


def raw_property_prefix(name: str) -> bytes:
    """What ``find_raw_property`` looks for: the name and its separator after a property
    separator, as UTF-8."""
    return (PROPERTY_SEPARATOR + name + NAME_VALUE_SEPARATOR).encode()


def find_raw_property(raw: bytes, prefix: bytes) -> bytes:
    """``find_property`` on UTF-8 properties as a record or a batch entry holds them (no
    separator byte occurs inside a multi-byte character); b"" when absent. The store's index
    reads two names per record, so the usual cases (a last entry with a value, or the first) are
    one search."""
    i = raw.rfind(prefix)
    if i >= 0:
        start = i + len(prefix)
    elif raw.startswith(prefix[1:]):  # the first property: no separator before it
        start = len(prefix) - 1
    else:
        return b""
    j = raw.find(_RAW_PROPERTY_SEPARATOR, start)
    value = raw[start:] if j < 0 else raw[start:j]
    if value:
        return value
    return _last_value(raw, prefix[1:], _RAW_PROPERTY_SEPARATOR) or b""


def string_to_properties(text: str) -> dict[str, str]:
    """Java's MessageDecoder.string2messageProperties: malformed entries are skipped."""
    if not text:
        return {}
    try:
        # Well-formed text (every entry one name and one value) in one C-level pass.
        props = dict(map(_SPLIT_NAME_VALUE, text.split(PROPERTY_SEPARATOR)))
        if "" not in props and "" not in props.values():
            return props
    except ValueError:
        pass
    props = {}
    for entry in text.split(PROPERTY_SEPARATOR):
        name, sep, value = entry.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            props[name] = value
    return props


# -- hosts ---------------------------------------------------------------------------------

Host = tuple[str, int]


def host_bytes(host: Host) -> bytes:
    """4+4 bytes for IPv4, 16+4 for IPv6."""
    ip = ipaddress.ip_address(host[0])
    return ip.packed + struct.pack(">i", host[1])


def is_ipv6(host: Host) -> bool:
    return ":" in host[0]


def _read_host(buf: bytes | memoryview | bytearray, pos: int, v6: bool) -> tuple[Host, int]:
    n = 16 if v6 else 4
    addr = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, bytes(buf[pos:pos + n]))
    (port,) = struct.unpack_from(">i", buf, pos + n)
    return (addr, port), pos + n + 4


# -- ids -----------------------------------------------------------------------------------

def create_offset_msg_id(store_host: Host, commit_log_offset: int) -> str:
    """Store host + port + commit-log offset, uppercase hex (docs/store-formats.md#offset-message-id)."""
    return (host_bytes(store_host) + struct.pack(">q", commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[Host, int]:
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"not an offset message id: {msg_id!r}")
    host, pos = _read_host(raw, 0, len(raw) == 28)
    (offset,) = struct.unpack_from(">q", raw, pos)
    return host, offset


# -- the stored record ---------------------------------------------------------------------

@dataclass
class MessageExt:
    """A decoded stored record (Java's MessageExt)."""

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    body_crc: int = 0
    store_size: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.KEYS)

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """What users see: UNIQ_KEY when the producer set one, else the offset id."""
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id


HOST_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
# The record's head, field by field (docs/store-formats.md#message-record): the one declaration
# every reader and builder of the layout derives its Structs and positions from. Each field's
# name and struct code; a host (``_HOST``) is its address and port, 4+4 bytes, or 16+4 under its
# sysFlag bit. Then come the body, the topic's length byte and topic, the properties' 2-byte
# length and properties.
_HOST = "host"
RECORD_HEAD_FIELDS = (("total_size", "i"), ("magic_code", "i"), ("body_crc", "i"), ("queue_id", "i"), ("flag", "i"),
                      ("queue_offset", "q"), ("physical_offset", "q"), ("sys_flag", "i"), ("born_timestamp", "q"),
                      ("born_host", _HOST), ("store_timestamp", "q"), ("store_host", _HOST),
                      ("reconsume_times", "i"), ("prepared_transaction_offset", "q"), ("body_length", "i"))
_HOST_FLAG = {"born_host": BORNHOST_V6_FLAG, "store_host": STOREHOSTADDRESS_V6_FLAG}


def _field_codes(flags: int) -> list[tuple[str, str]]:
    """Each field's name and fixed-size struct code (a host's as ``Ns``) under the host flags."""
    return [(name, code if code != _HOST else f"{20 if flags & _HOST_FLAG[name] else 8}s")
            for name, code in RECORD_HEAD_FIELDS]


def record_head(flags: int = 0, fields: Collection[str] | None = None, start: str = "total_size") -> struct.Struct:
    """A Struct of the head under the host flags, from field ``start`` through the body length:
    every field, or only ``fields`` with the others skipped as padding (a reader that wants a few
    fields of every record unpacks them in one call)."""
    codes = _field_codes(flags)
    names = [name for name, _ in codes]
    fmt = "".join(code if fields is None or name in fields else f"{struct.calcsize(code)}x"
                  for name, code in codes[names.index(start):])
    return struct.Struct(">" + fmt)


def record_field_at(name: str, flags: int = 0) -> int:
    """Where field ``name`` sits in a record under the host flags."""
    at = 0
    for field_name, code in _field_codes(flags):
        if field_name == name:
            return at
        at += struct.calcsize(">" + code)
    raise KeyError(name)


# The whole head by the host flags: one pack or unpack per record.
RECORD_HEADS = {flags: record_head(flags)
                for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, HOST_V6_FLAGS)}
# The same heads by (born host, store host) address lengths, with the flags they set: builders
# know the lengths of the addresses they write.
RECORD_HEADS_BY_HOSTS = {(20 if flags & BORNHOST_V6_FLAG else 8, 20 if flags & STOREHOSTADDRESS_V6_FLAG else 8):
                         (head, flags) for flags, head in RECORD_HEADS.items()}
# The fields a batch's records share (the batch's flags, born time and host, store time and host,
# reconsume times and prepared offset: all but the first seven and the body length).
BATCH_SHARED_FIELDS = ("sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
                       "prepared_transaction_offset")


def record_head_sharing(flags: int, shared: Collection[str] = BATCH_SHARED_FIELDS
                        ) -> tuple[struct.Struct, struct.Struct]:
    """The head under the host flags with the consecutive fields ``shared`` as one bytes field, and
    a Struct of those fields alone: records that share them pack them once, and each record packs
    the rest and that one field (a field of 8 bytes costs the most to pack)."""
    codes = _field_codes(flags)
    names = [name for name, _ in codes]
    first = names.index(next(iter(shared)))
    last = first + len(shared)
    if set(names[first:last]) != set(shared):
        raise ValueError(f"fields {sorted(shared)} are not consecutive in the head")
    middle = struct.Struct(">" + "".join(code for _, code in codes[first:last]))
    head = struct.Struct(">" + "".join(code for _, code in codes[:first]) + f"{middle.size}s"
                         + "".join(code for _, code in codes[last:]))
    return head, middle


# A record's bytes besides its hosts, body, topic and properties: the head without its hosts,
# the topic's length byte and the properties' length.
RECORD_FIXED_SIZE = RECORD_HEADS[0].size - 16 + 1 + 2
# The smallest record: IPv4 hosts, nothing in the body, topic or properties.
MIN_RECORD_SIZE = RECORD_FIXED_SIZE + 16
# A batch's heads by (born host, store host) address lengths: ``record_head_sharing``'s pair.
BATCH_RECORD_HEADS_BY_HOSTS = {hosts: record_head_sharing(flags) for hosts, (_, flags) in RECORD_HEADS_BY_HOSTS.items()}
# Where the body length sits, by the host flags: the head's last field.
BODY_LENGTH_AT = {flags: head.size - 4 for flags, head in RECORD_HEADS.items()}
# Where the sysFlag sits: before the hosts, the same for every record.
SYS_FLAG_AT = record_field_at("sys_flag")
# The fields before the born host: in the same place whatever the hosts.
_BEFORE_HOSTS = record_field_at("born_host")
_TOTAL_MAGIC = struct.Struct(">ii")  # the first two, a BLANK's as a record's
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")


def encode_record(msg: MessageExt, properties: bytes | None = None) -> bytes:
    """A whole stored record; ``properties`` (already encoded) overrides ``msg.properties``."""
    topic = msg.topic.encode()
    props = properties if properties is not None else properties_to_string(msg.properties).encode()
    born = host_bytes(msg.born_host)
    store = host_bytes(msg.store_host)
    head, host_flags = RECORD_HEADS_BY_HOSTS[len(born), len(store)]
    size = RECORD_FIXED_SIZE + len(born) + len(store) + len(msg.body) + len(topic) + len(props)
    return b"".join((
        head.pack(size, MESSAGE_MAGIC_CODE, msg.body_crc, msg.queue_id, msg.flag, msg.queue_offset,
                  msg.commit_log_offset, msg.sys_flag | host_flags, msg.born_timestamp, born, msg.store_timestamp,
                  store, msg.reconsume_times, msg.prepared_transaction_offset, len(msg.body)),
        msg.body, bytes((len(topic),)), topic, _I16.pack(len(props)), props))


class RecordError(ValueError):
    """Bytes that are not a valid stored record."""


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False,
                  read_body: bool = True, strict: bool = False, decompress: bool = False) -> MessageExt:
    """Decode the record at ``pos``; raises RecordError when it is torn, mis-sized or corrupt.

    ``strict`` (recovery) also refuses NUL bytes in the topic and properties: 4.9 records carry
    no checksum over those parts, and zeros there are the unwritten tail of a torn record.
    ``decompress`` is the client's view (Java's ``deCompressBody``): a body stored zlib-compressed
    is handed to the user inflated, with the sysFlag left as stored. The broker keeps bodies as
    stored, so a message it re-puts (retry, schedule, transaction) stays compressed.
    """
    end_of_buf = len(buf)
    if end_of_buf - pos < _BEFORE_HOSTS:
        raise RecordError("truncated record header")
    (total, magic) = _TOTAL_MAGIC.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"bad magic code {magic:#x}")
    if total < MIN_RECORD_SIZE or pos + total > end_of_buf:
        raise RecordError(f"record size {total} does not fit")
    (sys_flag,) = _I32.unpack_from(buf, pos + SYS_FLAG_AT)
    head = RECORD_HEADS[sys_flag & HOST_V6_FLAGS]
    try:
        (_, _, crc, queue_id, flag, queue_offset, phys, _, born_ts, born_raw, store_ts, store_raw, reconsume,
         prepared, body_len) = head.unpack_from(buf, pos)
        p = pos + head.size
        if body_len < 0 or p + body_len > pos + total:
            raise RecordError(f"body length {body_len} does not fit")
        body = bytes(buf[p:p + body_len]) if read_body else b""
        if check_crc:
            if (crc32(buf[p:p + body_len]) & 0x7FFFFFFF) != crc:
                raise RecordError("body CRC mismatch")
        p += body_len
        topic_len = buf[p]
        topic_raw = bytes(buf[p + 1:p + 1 + topic_len])
        p += 1 + topic_len
        (props_len,) = _I16.unpack_from(buf, p)
        p += 2
        props_raw = bytes(buf[p:p + props_len]) if props_len > 0 else b""
        p += max(props_len, 0)
        if strict and (not topic_raw or b"\x00" in topic_raw or b"\x00" in props_raw):
            raise RecordError("NUL bytes in topic or properties: a torn record")
        topic = _TOPICS.get(topic_raw) or _topic_of(topic_raw)
        props = string_to_properties(props_raw.decode()) if props_raw else {}
        born_host = _HOSTS.get(born_raw) or _host_of(born_raw)
        store_host = _HOSTS.get(store_raw) or _host_of(store_raw)
    except (struct.error, IndexError, UnicodeDecodeError, OSError) as exc:
        raise RecordError(f"corrupt record: {exc}") from None
    if p - pos != total:
        raise RecordError(f"record size {total} does not match its fields ({p - pos})")
    if decompress and sys_flag & COMPRESSED_FLAG and body:
        try:
            body = zlib.decompress(body)
        except zlib.error as exc:
            raise RecordError(f"compressed body does not inflate: {exc}") from None
    return MessageExt(topic, body, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_host, store_ts,
                      store_host, reconsume, prepared, props, crc, total)


# A pull answer repeats a handful of hosts and topics thousands of times: decode each once.
_HOSTS: dict[bytes, Host] = {}
_TOPICS: dict[bytes, str] = {}


def _host_of(raw: bytes) -> Host:
    host, _ = _read_host(raw, 0, len(raw) == 20)
    if len(_HOSTS) >= 4096:
        _HOSTS.clear()
    _HOSTS[raw] = host
    return host


def _topic_of(raw: bytes) -> str:
    topic = raw.decode()
    if len(_TOPICS) >= 4096:
        _TOPICS.clear()
    _TOPICS[raw] = topic
    return topic


def decode_records(buf: bytes | bytearray | memoryview, *, decompress: bool = False) -> Iterator[MessageExt]:
    """Every record of a pull/query body, in order."""
    pos = 0
    while pos < len(buf):
        msg = decode_record(buf, pos, decompress=decompress)
        yield msg
        pos += msg.store_size


# -- batch bodies (SEND_BATCH_MESSAGE) -----------------------------------------------------

@dataclass
class BatchEntry:
    flag: int
    body: bytes
    properties: str


_BATCH_ENTRY_HEAD = struct.Struct(">iiiii")


def encode_batch(entries: list[BatchEntry]) -> bytes:
    out = []
    for e in entries:
        props = e.properties.encode()
        out.append(_BATCH_ENTRY_HEAD.pack(22 + len(e.body) + len(props), 0, 0, e.flag, len(e.body)) + e.body
                   + _I16.pack(len(props)) + props)
    return b"".join(out)
