"""Request header fields read as Java reads them: Integer.parseInt / Long.parseLong for Int32 /
Int64 fields, Boolean.parseBoolean for booleans; a value Java refuses is refused naming its field."""

from __future__ import annotations

import dataclasses
import inspect
import typing
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rocketmq_py.remoting.protocol.broker
import rocketmq_py.remoting.protocol.heartbeat
import rocketmq_py.remoting.protocol.namesrv
import rocketmq_py.remoting.protocol.transaction
from rocketmq_py.remoting.header import CommandHeader, HeaderError, parse_boolean, parse_int, parse_long
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeaderV2

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def java_parse(text: str, low: int, high: int) -> int | None:
    """Integer.parseInt / Long.parseLong as the JDK spells it out: a sign, then digits each read
    by Character.digit(c, 10) (any Unicode decimal digit), nothing else; None where it throws."""
    if not text:
        return None
    negative = text[0] == "-"
    start = 1 if text[0] in "+-" else 0
    if start == len(text):
        return None
    value = 0
    for ch in text[start:]:
        digit = unicodedata.decimal(ch, -1)
        if digit < 0:
            return None
        value = value * 10 + digit
    value = -value if negative else value
    return value if low <= value <= high else None


NUMBERISH = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.builds(lambda b, d: str(b + d), st.sampled_from([2**31, -(2**31), 2**63, -(2**63), 0]), st.integers(-2, 2)),
    st.builds(lambda sign, digits: sign + digits, st.sampled_from(["", "+", "-", " ", "--", "+-"]),
              st.text(alphabet="0123456789 _.eE\u0663\uff11\u00b2x", max_size=22)),
    st.text(max_size=12),
)


@given(NUMBERISH)
def test_integers_are_read_as_java_reads_them(text: str) -> None:
    for parse, (low, high) in ((parse_int, INT32), (parse_long, INT64)):
        expected = java_parse(text, low, high)
        if expected is None:
            with pytest.raises(ValueError):
                parse(text)
        else:
            assert parse(text) == expected


@given(st.text(max_size=8))
def test_booleans_are_true_only_for_true_in_any_case(text: str) -> None:
    assert parse_boolean(text) is (text.lower() == "true")
    # The generated readers spell the parse inline: read through one too.
    ext = {**_good(SendMessageRequestHeaderV2), SendMessageRequestHeaderV2.wire_key("batch"): text}
    assert SendMessageRequestHeaderV2.from_ext_fields(ext).batch is (text.lower() == "true")


def _headers() -> list[type[CommandHeader]]:
    protocol = rocketmq_py.remoting.protocol
    modules = (protocol.broker, protocol.namesrv, protocol.transaction, protocol.heartbeat)
    found: list[type[CommandHeader]] = []
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, CommandHeader) and cls is not CommandHeader and dataclasses.is_dataclass(cls):
                found.append(cls)
    return found


def _good(cls: type[CommandHeader]) -> dict[str, str]:
    """Every field of ``cls`` with a value Java takes."""
    out = {}
    for spec in cls._specs():
        out[spec.key] = {bool: "true", str: "x", float: "1.5"}.get(spec.kind, "7")
    return out


@pytest.mark.parametrize("cls", _headers(), ids=lambda c: c.__name__)
def test_every_header_integer_field_declares_its_java_type(cls: type[CommandHeader]) -> None:
    hints = typing.get_type_hints(cls, include_extras=True)
    for spec in cls._specs():
        assert spec.kind in (str, bool, float, "int", "long"), f"{cls.__name__}.{spec.name}: {hints[spec.name]}"
    assert cls.from_ext_fields(_good(cls)).to_ext_fields() == _good(cls)


@pytest.mark.parametrize("cls", [c for c in _headers() if any(s.kind in ("int", "long") for s in c._specs())],
                         ids=lambda c: c.__name__)
@given(data=st.data())
def test_a_value_java_refuses_is_refused_naming_its_field(cls: type[CommandHeader], data: st.DataObject) -> None:
    spec = data.draw(st.sampled_from([s for s in cls._specs() if s.kind in ("int", "long")]))
    text = data.draw(NUMBERISH)
    low, high = INT32 if spec.kind == "int" else INT64
    ext = {**_good(cls), spec.key: text}
    expected = java_parse(text, low, high)
    if expected is None:
        with pytest.raises(HeaderError, match=f"<{spec.key}> is not a valid {spec.kind}"):
            cls.from_ext_fields(ext)
    else:
        assert getattr(cls.from_ext_fields(ext), spec.name) == expected


def test_a_remark_quotes_a_long_value_cut() -> None:
    ext = {**_good(rocketmq_py.remoting.protocol.broker.ViewMessageRequestHeader), "offset": "9" * 100_000}
    with pytest.raises(HeaderError) as refused:
        rocketmq_py.remoting.protocol.broker.ViewMessageRequestHeader.from_ext_fields(ext)
    assert "<offset>" in str(refused.value) and "(100000 characters)" in str(refused.value)
    assert len(str(refused.value)) < 200


def test_wire_keys_are_the_declared_ones() -> None:
    """The keys code reads and writes without a typed header (the producer's and the broker's
    plain sends) come from the declarations: V2's single letters, V1's field names."""
    v1 = rocketmq_py.remoting.protocol.broker.SendMessageRequestHeader
    v2 = rocketmq_py.remoting.protocol.broker.SendMessageRequestHeaderV2
    keys = [v2.wire_key(f.name) for f in dataclasses.fields(v2)]
    assert keys == [f.metadata["wire"] for f in dataclasses.fields(v2)]
    assert len(set(keys)) == len(keys) and all(len(key) == 1 for key in keys)
    assert [v1.wire_key(f.name) for f in dataclasses.fields(v1)] == [f.name for f in dataclasses.fields(v1)]
    with pytest.raises(KeyError, match="no field 'queue_id'"):
        v2.wire_key("queue_id")
