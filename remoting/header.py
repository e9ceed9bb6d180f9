"""Typed request/response headers that travel as extFields.

On the wire every header field is a string in ``extFields`` (docs/protocol.md#json-header). A header class is
a dataclass whose annotations give each field's Java type; ``from_ext_fields`` parses strings
into those types and ``to_ext_fields`` writes them back the way Java's ``toString`` does
(decimal ints, ``"true"``/``"false"``). Fields without a default are required, like Java's
``@CFNotNull``; a missing or unparsable one raises ``HeaderError`` with a remark a person can
act on, which the server answers as SYSTEM_ERROR instead of failing later in the handler.

Integers are declared ``Int32`` (Java's ``int``/``Integer``) or ``Int64`` (``long``/``Long``)
and read as ``Integer.parseInt`` / ``Long.parseLong`` read them: an optional sign and decimal
digits, inside the type's range. Python's ``int()`` also takes spaces, underscores and any size;
a value Java refuses must be refused here before anything is stored, or it fails later, half
way through a put (docs/request-fields.md).

A field whose wire name differs from its Python name (the single-letter keys of
SendMessageRequestHeaderV2) says so with ``wire("a")``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Self


class HeaderError(ValueError):
    """A request header is missing a required field or holds an unparsable value."""


def wire(key: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a header field whose extFields key is ``key``."""
    return dataclasses.field(default=default, metadata={"wire": key})


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# A header field's Java integer type, by name: ``queueId: Int32``, ``queueOffset: Int64``.
Int32 = Annotated[int, "int"]
Int64 = Annotated[int, "long"]


def _parse_integer(raw: str, low: int, high: int) -> int:
    # Integer.parseInt / Long.parseLong: a sign, then one or more digits (Character.digit takes
    # any Unicode decimal digit, as str.isdecimal does), and nothing else: no spaces, no "_".
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if not digits.isdecimal():
        raise ValueError("not a decimal number")
    value = int(raw)
    if not low <= value <= high:
        raise ValueError("out of range")
    return value


def parse_int(raw: str) -> int:
    """Java's ``Integer.parseInt``: ValueError for anything it throws NumberFormatException on."""
    return _parse_integer(raw, INT32_MIN, INT32_MAX)


def parse_long(raw: str) -> int:
    """Java's ``Long.parseLong``: ValueError for anything it throws NumberFormatException on."""
    return _parse_integer(raw, INT64_MIN, INT64_MAX)


def parse_boolean(raw: str) -> bool:
    """Java's ``Boolean.parseBoolean``: "true" in any case is true, anything else false."""
    return raw.lower() == "true"


def shown(raw: str, limit: int = 64) -> str:
    """A client's value as a remark quotes it: repr'd, and cut (a header value may be megabytes)."""
    return repr(raw) if len(raw) <= limit else repr(raw[:limit]) + f"... ({len(raw)} characters)"


_PARSERS: dict[Any, typing.Callable[[str], Any]] = {
    str: str, "int": parse_int, "long": parse_long, float: float, bool: parse_boolean}
_JAVA_NAMES: dict[Any, str] = {str: "String", "int": "int", "long": "long", float: "double", bool: "boolean"}
# The most decimal digits, without a sign, that are in range of each integer kind whatever they are.
_PLAIN_DIGITS: dict[Any, int] = {"int": len(str(INT32_MAX)) - 1, "long": len(str(INT64_MAX)) - 1}


class _Spec(typing.NamedTuple):
    name: str
    key: str
    kind: Any  # str, bool, float, or "int" / "long" for Int32 / Int64
    required: bool
    default: Any


class CommandHeader:
    """Base of every typed header; subclasses are ``@dataclass`` classes."""

    _specs_cache: ClassVar[tuple[_Spec, ...] | None] = None
    _codec_cache: ClassVar[tuple[Callable[..., Any], Callable[..., Any]] | None] = None

    @classmethod
    def _specs(cls) -> tuple[_Spec, ...]:
        cached: tuple[_Spec, ...] | None = cls.__dict__.get("_specs_cache")
        if cached is not None:
            return cached
        hints = typing.get_type_hints(cls, include_extras=True)
        specs = []
        # type-ignored: every CommandHeader subclass is a dataclass; the base is not
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            kind = hints[f.name]
            if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
                kind = next(a for a in typing.get_args(kind) if a is not type(None))
            if typing.get_origin(kind) is Annotated:
                kind = typing.get_args(kind)[1]
            if kind not in _PARSERS:
                # A bare ``int`` too: its Java type decides which values are refused.
                raise TypeError(f"{cls.__name__}.{f.name}: unsupported header type {kind!r} "
                                "(integers are Int32 or Int64)")
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            default = None if f.default is dataclasses.MISSING else f.default
            specs.append(_Spec(f.name, f.metadata.get("wire", f.name), kind, required, default))
        result = tuple(specs)
        cls._specs_cache = result
        return result

    @classmethod
    def wire_key(cls, name: str) -> str:
        """The extFields key of field ``name``: its ``wire`` declaration, else the name itself.
        Code that reads or writes extFields without the typed header (the producer's and the
        broker's plain sends) takes its keys from here, so the declaration stays the one source."""
        for spec in cls._specs():
            if spec.name == name:
                return spec.key
        raise KeyError(f"{cls.__name__} has no field {name!r}")

    @classmethod
    def from_ext_fields(cls, ext: dict[str, str]) -> Self:
        # type-ignored: the codec is generated per class (exec), so typed Callable[..., Any]
        return cls._codec()[0](cls, ext)  # type: ignore[no-any-return]

    def to_ext_fields(self) -> dict[str, str]:
        # type-ignored: the codec is generated per class (exec), so typed Callable[..., Any]
        return self._codec()[1](self)  # type: ignore[no-any-return]

    @classmethod
    def decoder(cls) -> Callable[[dict[str, str]], Self]:
        """``from_ext_fields`` as one plain function, for the hottest handlers."""
        return functools.partial(cls._codec()[0], cls)

    @classmethod
    def _codec(cls) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """Per-class reader and writer, generated once from the field specs.

        Headers are parsed and written for every request on every daemon; straight-line code
        with no per-field dispatch costs a fraction of a generic loop (dataclasses generates
        its ``__init__`` the same way).
        """
        codec: tuple[Callable[..., Any], Callable[..., Any]] | None = cls.__dict__.get("_codec_cache")
        if codec is not None:
            return codec
        specs = cls._specs()
        read = ["def from_ext(cls, ext):", "    get = ext.get"]
        names = []
        for i, spec in enumerate(specs):
            var = f"v{i}"
            names.append(var)
            read.append(f"    {var} = get({spec.key!r})")
            read.append(f"    if {var} is None:")
            if spec.required:
                read.append(f"        raise HeaderError('the custom field <{spec.key}> is null')")
            else:
                read.append(f"        {var} = default_{i}")
            if spec.kind is not str:
                read.append("    else:")
                read.append("        try:")
                if spec.kind in _PLAIN_DIGITS:
                    # Digits alone, few enough to be in range whatever they are (a queue id, a
                    # timestamp): int() gives what the parser would, without its two calls.
                    read.append(f"            {var} = int({var}) if len({var}) <= {_PLAIN_DIGITS[spec.kind]} "
                                f"and {var}.isdecimal() else parse_{i}({var})")
                elif spec.kind is bool:
                    read.append(f"            {var} = {var}.lower() == 'true'  # parse_boolean, inline")
                else:
                    read.append(f"            {var} = parse_{i}({var})")
                read.append("        except (TypeError, ValueError):")
                read.append(f"            raise HeaderError('the custom field <{spec.key}> is not a valid "
                            f"{_JAVA_NAMES[spec.kind]}: ' + shown({var})) from None")
        read.append(f"    return cls({', '.join(names)})")
        write = ["def to_ext(self):", "    out = {}"]
        for spec in specs:
            write.append(f"    v = self.{spec.name}")
            write.append("    if v is not None:")
            if spec.kind is bool:
                write.append(f"        out[{spec.key!r}] = 'true' if v else 'false'")
            elif spec.kind is str:
                write.append(f"        out[{spec.key!r}] = v")
            else:
                write.append(f"        out[{spec.key!r}] = str(v)")
        write.append("    return out")
        namespace: dict[str, Any] = {"HeaderError": HeaderError, "shown": shown}
        for i, spec in enumerate(specs):
            namespace[f"default_{i}"] = spec.default
            namespace[f"parse_{i}"] = _PARSERS[spec.kind]
        exec("\n".join(read) + "\n" + "\n".join(write), namespace)
        codec = (namespace["from_ext"], namespace["to_ext"])
        cls._codec_cache = codec
        return codec


def prepare_header_codecs() -> int:
    """The codec of every header class imported so far built now (``CommandHeader._codec``),
    rather than by the first request that reads or writes one: a build (type hints, generated
    code compiled) took about 280 µs of the event loop a class here, and a new broker's first
    send and the held pulls it answered built three to six of them while every message in
    flight waited (docs/latency.md). Daemons call it once started, before their boot line and
    the heap's freeze (common/daemon.py). The number of classes."""
    classes: dict[type[CommandHeader], None] = {}
    pending = [CommandHeader]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in classes:
                classes[sub] = None
                pending.append(sub)
    for cls in classes:
        if dataclasses.is_dataclass(cls):
            cls._codec()
    return len(classes)
