"""Typed request/response headers that travel as extFields.

On the wire every header field is a string in ``extFields`` (remoting.md §3). A header class is
a dataclass whose annotations give each field's Java type; ``from_ext_fields`` parses strings
into those types and ``to_ext_fields`` writes them back the way Java's ``toString`` does
(decimal ints, ``"true"``/``"false"``). Fields without a default are required, like Java's
``@CFNotNull``; a missing or unparsable one raises ``HeaderError`` with a remark a person can
act on, which the server answers as SYSTEM_ERROR instead of failing later in the handler.

A field whose wire name differs from its Python name (the single-letter keys of
SendMessageRequestHeaderV2) says so with ``wire("a")``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Self


class HeaderError(ValueError):
    """A request header is missing a required field or holds an unparsable value."""


def wire(key: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a header field whose extFields key is ``key``."""
    return dataclasses.field(default=default, metadata={"wire": key})


def _parse_bool(raw: str) -> bool:
    # Java's Boolean.parseBoolean: case-insensitive "true", anything else is false.
    return raw.lower() == "true"


_PARSERS: dict[type, typing.Callable[[str], Any]] = {str: str, int: int, float: float, bool: _parse_bool}


def _format(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


class _Spec(typing.NamedTuple):
    name: str
    key: str
    kind: type
    required: bool
    default: Any


class CommandHeader:
    """Base of every typed header; subclasses are ``@dataclass`` classes."""

    _specs_cache: ClassVar[tuple[_Spec, ...] | None] = None

    @classmethod
    def _specs(cls) -> tuple[_Spec, ...]:
        cached = cls.__dict__.get("_specs_cache")
        if cached is not None:
            return cached
        hints = typing.get_type_hints(cls)
        specs = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            kind = hints[f.name]
            if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
                kind = next(a for a in typing.get_args(kind) if a is not type(None))
            if kind not in _PARSERS:
                raise TypeError(f"{cls.__name__}.{f.name}: unsupported header type {kind!r}")
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            default = None if f.default is dataclasses.MISSING else f.default
            specs.append(_Spec(f.name, f.metadata.get("wire", f.name), kind, required, default))
        result = tuple(specs)
        cls._specs_cache = result
        return result

    @classmethod
    def from_ext_fields(cls, ext: dict[str, str]) -> Self:
        values: dict[str, Any] = {}
        for spec in cls._specs():
            raw = ext.get(spec.key)
            if raw is None:
                if spec.required:
                    raise HeaderError(f"the custom field <{spec.key}> is null")
                continue
            try:
                values[spec.name] = _PARSERS[spec.kind](raw)
            except (TypeError, ValueError):
                raise HeaderError(
                    f"the custom field <{spec.key}> is not a valid {spec.kind.__name__}: {raw!r}"
                ) from None
        return cls(**values)

    def to_ext_fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for spec in self._specs():
            value = getattr(self, spec.name)
            if value is not None:
                out[spec.key] = _format(value)
        return out
