"""RocketMQ-style configuration: Java ``.properties`` files applied to pydantic models.

Java's startup classes read one properties file and copy every key onto whichever config
objects have a field of that name (MixAll.properties2Object): a broker.conf holds broker,
network and store settings side by side. ``apply_properties`` does the same onto several
pydantic models, so field names stay RocketMQ's, pydantic turns ``"true"``/``"10911"`` into
typed values, and a bad value fails with the key named instead of starting a daemon wrongly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the key and the reason."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 6 <= len(s):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: ``#``/``!`` comments, ``=``/``:``/space separators,
    backslash line continuations and escapes."""
    result: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        key_end = 0
        while key_end < len(entry):
            ch = entry[key_end]
            if ch == "\\":
                key_end += 2
                continue
            if ch in "=: \t\f":
                break
            key_end += 1
        key = entry[:key_end]
        rest = entry[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(key)] = _unescape(rest)
    if logical:
        entry = "".join(logical)
        result[_unescape(entry.split("=", 1)[0].strip())] = _unescape(entry.partition("=")[2].strip())
    return result


def read_properties_file(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None


def apply_properties(models: Sequence[type[BaseModel]], props: Mapping[str, Any]) -> tuple[list[BaseModel], set[str]]:
    """Build each model from the keys it declares; returns the models and the keys none declared."""
    built: list[BaseModel] = []
    used: set[str] = set()
    for model in models:
        # Keys are field names, or aliases where a RocketMQ name is no identifier (tls.server.mode).
        fields = set(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}
        values = {k: v for k, v in props.items() if k in fields}
        used |= values.keys()
        try:
            built.append(model.model_validate(values))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}={e.get('input')!r}: {e['msg']}"
                                 for e in exc.errors())
            raise ConfigError(f"invalid {model.__name__}: {problems}") from None
    return built, set(props) - used


def format_properties(*models: BaseModel) -> str:
    """``key=value`` lines, the form ``-p`` prints and UPDATE/GET_*_CONFIG bodies carry."""
    lines: list[str] = []
    for model in models:
        for name, value in model.model_dump(by_alias=True).items():
            if value is None:
                continue  # unset: leaving it out keeps it unset when read back
            if isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{name}={value}")
    return "\n".join(lines) + "\n"
