"""JSON bodies the way RocketMQ's fastjson writes and reads them.

Java writes bodies with fastjson: object fields in alphabetical order, nulls omitted, no
whitespace, and -- in its default mode -- integer map keys UNQUOTED (``{0:"10.0.0.1:10911"}``),
which is not valid JSON (headers.md §7, store-formats.md §6). So every reader here accepts both
quoted and bare numeric keys, and writers can produce either form for the peers that need it
(the Go client breaks on quoted broker-id keys).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

_decoder = json.JSONDecoder()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a body that may hold fastjson's bare numeric keys.

    Standard JSON takes the C parser directly; only a body that fails it is rewritten by a
    string-aware scan that quotes bare keys, so values that merely look like keys are untouched.
    """
    text = data if isinstance(data, str) else bytes(data).decode()
    try:
        return _decoder.decode(text)
    except json.JSONDecodeError:
        return _decoder.decode(quote_bare_keys(text))


def quote_bare_keys(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    expect_key = False  # just after '{' or ',' inside an object
    depth: list[str] = []
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
            expect_key = False
        elif c in "{[":
            depth.append(c)
            expect_key = c == "{"
        elif c in "}]":
            if depth:
                depth.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(depth) and depth[-1] == "{"
        elif expect_key and (c == "-" or c.isdigit()):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            out.append(f'"{text[i:j]}"')
            i = j
            expect_key = False
            continue
        elif not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(obj: Any) -> bytes:
    """Compact JSON (standard form: every key quoted)."""
    return _encoder.encode(obj).encode()


def unquote_int_keys(text: str, field: str) -> str:
    """fastjson default form for one map-valued field: ``"field":{"0":..}`` -> ``{0:..}``.

    Applied only to the named field so nothing else in the body changes; used for peers that
    expect Java's non-standard output (old Java and Go clients reading brokerAddrs).
    """
    key = f'"{field}":{{'
    out: list[str] = []
    pos = 0
    while True:
        start = text.find(key, pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        i = start + len(key)
        out.append(text[pos:i])
        depth = 1
        expect_key = True
        in_string = False
        while i < len(text) and depth:
            c = text[i]
            if in_string:
                out.append(c)
                if c == "\\":
                    out.append(text[i + 1])
                    i += 1
                elif c == '"':
                    in_string = False
            elif expect_key and depth == 1 and c == '"':
                end = text.index('"', i + 1)
                name = text[i + 1:end]
                out.append(name if name.lstrip("-").isdigit() else text[i:end + 1])
                i = end
                expect_key = False
            else:
                if c == '"':
                    in_string = True
                elif c in "{[":
                    depth += 1
                elif c in "}]":
                    depth -= 1
                elif c == "," and depth == 1:
                    expect_key = True
                out.append(c)
            i += 1
        pos = i


class JsonBody(BaseModel):
    """Base of every JSON body: Java field names, unknown keys ignored, nulls left out.

    Declare fields in alphabetical order: fastjson writes them sorted, and so do we.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str | None) -> Any:
        if not data:
            raise ValueError(f"{cls.__name__} body is empty")
        return cls.model_validate(loads(data))

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()
