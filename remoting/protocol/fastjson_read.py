"""Reading fastjson's non-standard JSON: maps keyed by objects (Java's ``Map<MessageQueue, ...>``
is written with each key a JSON object, docs/protocol.md#json-bodies), anywhere in a document, such
as ConsumeStatsList's list of groups each with its ConsumeStats. ``decode_mq_keyed`` reads one
such map at a known field; this reads a whole document."""

from __future__ import annotations

import json
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


# type-ignored: a key of any length and item types, as fastjson reads an object used as a map key
class FrozenKey(tuple):  # type: ignore[type-arg]
    """An object key, hashable: its (name, value) pairs in name order."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


def loads(text: str | bytes) -> Any:
    """The document with object keys as FrozenKey; ValueError when it is not fastjson's JSON."""
    if isinstance(text, bytes):
        text = text.decode()
    value, pos = _value(text, _skip(text, 0))
    if _skip(text, pos) != len(text):
        raise ValueError(f"extra data at {pos}")
    return value


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def _value(text: str, pos: int) -> tuple[Any, int]:
    if pos >= len(text):
        raise ValueError("unexpected end of document")
    if text[pos] == "{":
        return _object(text, pos + 1)
    if text[pos] == "[":
        items: list[Any] = []
        pos = _skip(text, pos + 1)
        if text[pos] == "]":
            return items, pos + 1
        while True:
            item, pos = _value(text, _skip(text, pos))
            items.append(item)
            pos = _skip(text, pos)
            if text[pos] == "]":
                return items, pos + 1
            if text[pos] != ",":
                raise ValueError(f"expected , or ] at {pos}")
            pos += 1
    return _DECODER.raw_decode(text, pos)


def _object(text: str, pos: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    pos = _skip(text, pos)
    if text[pos] == "}":
        return out, pos + 1
    while True:
        pos = _skip(text, pos)
        if text[pos] == "{":
            raw, pos = _object(text, pos + 1)
            key: Any = FrozenKey(sorted(raw.items()))
        else:
            key, pos = _DECODER.raw_decode(text, pos)
            if not isinstance(key, str):
                key = str(key)
        pos = _skip(text, pos)
        if text[pos] != ":":
            raise ValueError(f"expected : at {pos}")
        value, pos = _value(text, _skip(text, pos + 1))
        out[key] = value
        pos = _skip(text, pos)
        if text[pos] == "}":
            return out, pos + 1
        if text[pos] != ",":
            raise ValueError(f"expected , or }} at {pos}")
        pos += 1
