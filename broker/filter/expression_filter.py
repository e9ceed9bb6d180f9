"""The broker's SQL92 check of pulled records (Java's ExpressionMessageFilter.isMatchedByCommitLog).

Only groups that subscribe with SQL92 pay for it: their candidate records' properties are decoded
and the compiled selector evaluated; TAG pulls never come here. Compiled selectors are cached by
text (like SelectorParser's parse cache), failures too, so a pull does not re-parse.
"""

from __future__ import annotations

import struct
from collections import OrderedDict

from rocketmq_py.broker.filter.sql92 import FilterError, Sql92Expression, compile_sql92
from rocketmq_py.remoting.protocol.message import BODY_LENGTH_AT, HOST_V6_FLAGS, SYS_FLAG_AT, string_to_properties

# Distinct selectors a broker keeps compiled; the oldest is dropped first.
_CACHE_SIZE = 1024
_cache: OrderedDict[str, Sql92Expression | FilterError] = OrderedDict()


def compile_cached(text: str | None) -> Sql92Expression:
    """compile_sql92 with a bounded cache; raises FilterError for a bad selector."""
    key = text or ""
    hit = _cache.get(key)
    if hit is None:
        try:
            hit = compile_sql92(text)
        except FilterError as exc:
            hit = exc
        _cache[key] = hit
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    if isinstance(hit, FilterError):
        raise hit
    return hit


_I32 = struct.Struct(">i")
_PROPS_LEN = struct.Struct(">h")


def record_properties(buf: bytes) -> dict[str, str]:
    """Only the properties of a stored record (layout in docs/store-formats.md#message-record): the filter needs
    nothing else, and skipping the rest of MessageExt halves the cost per record."""
    (sys_flag,) = _I32.unpack_from(buf, SYS_FLAG_AT)
    p = BODY_LENGTH_AT[sys_flag & HOST_V6_FLAGS]  # past the hosts, which the flags size
    (body_len,) = _I32.unpack_from(buf, p)
    p += 4 + body_len
    p += 1 + buf[p]  # topic
    (props_len,) = _PROPS_LEN.unpack_from(buf, p)
    if props_len <= 0:
        return {}
    return string_to_properties(bytes(buf[p + 2:p + 2 + props_len]).decode())


def filter_records(buffers: list[bytes], expression: Sql92Expression) -> list[bytes]:
    """The records whose properties satisfy the selector; an undecodable record never matches."""
    kept = []
    for buf in buffers:
        try:
            props = record_properties(buf)
        except (struct.error, IndexError, UnicodeDecodeError):
            continue
        if expression.matches(props):
            kept.append(buf)
    return kept
