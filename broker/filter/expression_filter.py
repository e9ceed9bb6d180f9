"""The broker's SQL92 check of pulled records (Java's ExpressionMessageFilter.isMatchedByCommitLog).

Only groups that subscribe with SQL92 pay for it: their candidate records' properties are decoded
and the compiled selector evaluated; TAG pulls never come here. Compiled selectors are cached by
text (like SelectorParser's parse cache), failures too, so a pull does not re-parse.
"""

from __future__ import annotations

from collections import OrderedDict

from broker.filter.sql92 import FilterError, Sql92Expression, compile_sql92
from remoting.protocol.message import RecordError, decode_record

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


def filter_records(buffers: list[bytes], expression: Sql92Expression) -> list[bytes]:
    """The records whose properties satisfy the selector; an undecodable record never matches."""
    kept = []
    for buf in buffers:
        try:
            props = decode_record(buf, 0).properties
        except RecordError:
            continue
        if expression.matches(props):
            kept.append(buf)
    return kept
