"""JSON bodies the way RocketMQ's fastjson writes and reads them.

Java writes bodies with fastjson: object fields in alphabetical order, nulls omitted, no
whitespace, and -- in its default mode -- integer map keys UNQUOTED (``{0:"10.0.0.1:10911"}``),
which is not valid JSON (docs/protocol.md#json-bodies says which body takes which form). So
every reader here accepts both quoted and bare numeric keys, and writers can produce either
form for the peers that need it (the Go client breaks on quoted broker-id keys).

Reading is as lenient as fastjson's, whoever wrote the body (docs/clients.md lists what each
client sends): the C++ client writes enums as their ordinals and numbers as strings, and some
clients leave out fields Java gives a default. ``JsonBody`` applies those rules once, for every
field of every body, so no field needs a rule of its own.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Any, ClassVar, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, ValidationError, model_validator

from rocketmq_py.remoting.exceptions import RemotingCommandException

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


# How one field's raw value is read (see ``JsonBody._fastjson_lenient``).
_SCALAR = "scalar"  # int, float, bool: a string holding one may carry whitespace around it


class _FieldRule(typing.NamedTuple):
    name: str
    kind: type[enum.Enum] | str | None  # an Enum class, _SCALAR, or None (as pydantic reads it)
    defaulted: bool


class JsonBody(BaseModel):
    """Base of every JSON body: Java field names, unknown keys ignored, nulls left out.

    Declare fields in alphabetical order: fastjson writes them sorted, and so do we. Enum
    fields' members must be declared in Java's order, since their position is the ordinal a
    client may send instead of the name.

    Every field is read as fastjson reads a Java bean's property:
    - an enum as its name or its ordinal (a number, or a string of digits); an unknown or empty
      name is null to fastjson, so the field keeps its default;
    - an int, float or bool also from a string (``"1700000000"``, ``" 12 "``, ``"true"``), and a
      string field also from a number (its text);
    - null, or a missing key, leaves a field that has a default at that default;
    - keys no field declares are ignored.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True, coerce_numbers_to_str=True)

    _rules_cache: ClassVar[dict[str, _FieldRule] | None] = None

    @classmethod
    def _rules(cls) -> dict[str, _FieldRule]:
        """Input key -> rule for every field (under its name and each alias), built once per class."""
        cached: dict[str, _FieldRule] | None = cls.__dict__.get("_rules_cache")
        if cached is not None:
            return cached
        rules: dict[str, _FieldRule] = {}
        for name, info in cls.model_fields.items():
            kind = _unwrap_optional(info.annotation)
            rule_kind: type[enum.Enum] | str | None = None
            if isinstance(kind, type) and issubclass(kind, enum.Enum):
                rule_kind = kind
            elif kind in (int, float, bool):
                rule_kind = _SCALAR
            rule = _FieldRule(name, rule_kind, not info.is_required())
            keys = {name}
            if isinstance(info.validation_alias, AliasChoices):
                keys.update(c for c in info.validation_alias.choices if isinstance(c, str))
            elif isinstance(info.validation_alias, str):
                keys.add(info.validation_alias)
            if info.alias:
                keys.add(info.alias)
            for key in keys:
                rules[key] = rule
        cls._rules_cache = rules
        return rules

    @model_validator(mode="before")
    @classmethod
    def _fastjson_lenient(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        rules = cls._rules()
        out: dict[str, Any] | None = None
        for key, value in data.items():
            rule = rules.get(key)
            if rule is None:
                continue
            new = _lenient_value(rule, value)
            if new is value:
                continue
            if out is None:
                out = dict(data)
            if new is _DROP:
                del out[key]
            else:
                out[key] = new
        return data if out is None else out

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str | None) -> Self:
        if not data:
            raise ValueError(f"{cls.__name__} body is empty")
        return cls.model_validate(loads(data))

    @classmethod
    def decode_request(cls, body: bytes | None, what: str) -> Self:
        """A request's body read as this class; one that cannot be read refuses the request
        (RemotingCommandException: SYSTEM_ERROR, ``bad <what>: <its first error>``)."""
        try:
            return cls.decode(body)
        except ValueError as exc:  # pydantic's ValidationError is one
            raise RemotingCommandException(f"bad {what}: {first_error(exc)}") from None

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()


_DROP = object()  # the key is removed, so pydantic gives the field its default


def first_error(exc: Exception) -> str:
    """What a remark says of a body that cannot be read: pydantic lists every error, a remark
    names the first (``field.path: message``)."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
    return str(exc)


def _unwrap_optional(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _lenient_value(rule: _FieldRule, value: Any) -> Any:
    """``value`` as fastjson would read it into the field, or ``_DROP`` for "keep the default"."""
    if value is None:
        return _DROP if rule.defaulted else value
    kind = rule.kind
    if kind is None:
        return value
    if kind == _SCALAR:
        if isinstance(value, str):
            stripped = value.strip()
            return stripped if stripped != value else value
        return value
    assert isinstance(kind, type)
    members: list[enum.Enum] = list(kind)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            value = int(text)
        else:
            for member in members:
                if member.name == text or member.value == text:
                    return member
            # fastjson reads an unknown or empty name as null.
            return _DROP if rule.defaulted else value
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(members):
            return members[value]
        raise ValueError(f"{rule.name}: no {kind.__name__} has ordinal {value}")
    return value
