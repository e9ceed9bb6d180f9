"""The SQL92 selector: RocketMQ's grammar, typing and null rules, without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.broker.filter import FilterError, compile_sql92
from rocketmq_py.broker.filter.expression_filter import compile_cached, filter_records, record_properties
from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.remoting.protocol.heartbeat import SUB_ALL, ExpressionType
from rocketmq_py.remoting.protocol.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    MessageExt,
    decode_record,
    encode_record,
)


def ev(sql: str, **props: str) -> object:
    return compile_sql92(sql).evaluate(props)


@pytest.mark.parametrize(("sql", "props", "expected"), [
    # the example: numeric comparison of a string property, IN over strings
    ("a > 5 AND region IN ('eu','us')", {"a": "10", "region": "eu"}, True),
    ("a > 5 AND region IN ('eu','us')", {"a": "10", "region": "asia"}, False),
    ("a > 5 AND region IN ('eu','us')", {"a": "3", "region": "us"}, False),
    ("a > 5 AND region IN ('eu','us')", {"region": "us"}, None),  # a missing: unknown
    ("a > 5 AND region IN ('eu','us')", {"a": "3"}, False),  # FALSE AND unknown = FALSE
    # comparisons, with longs, doubles, negatives
    ("a = 5", {"a": "5"}, True),
    ("a <> 5", {"a": "5"}, False),
    ("a <> 5", {"a": "6"}, True),
    ("a >= 5", {"a": "5"}, True),
    ("a < 5.5", {"a": "5"}, True),
    ("a <= -1", {"a": "-1"}, True),
    ("a > 1.5", {"a": "1.25"}, False),
    ("a = 3000000000", {"a": "3000000000"}, True),  # a long literal
    ("a > b", {"a": "10", "b": "9"}, True),  # two string properties ordered as doubles
    # BETWEEN, NOT BETWEEN
    ("a BETWEEN 1 AND 3", {"a": "1"}, True),
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a BETWEEN 1 AND 3", {"a": "4"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
    # strings: equality only, quotes doubled
    ("region = 'eu'", {"region": "eu"}, True),
    ("region = 'eu'", {"region": "EU"}, False),
    ("name = 'O''Brien'", {"name": "O'Brien"}, True),
    ("region NOT IN ('eu', 'us')", {"region": "cn"}, True),
    ("region NOT IN ('eu', 'us')", {}, None),
    # IS NULL / IS NOT NULL
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": "1"}, False),
    ("a IS NOT NULL", {"a": ""}, True),
    # three-valued logic
    ("a = 1 OR b = 'x'", {"b": "x"}, True),
    ("a = 1 OR b = 'x'", {"b": "y"}, None),
    ("NOT (a = 1)", {}, None),
    ("NOT (a = 1)", {"a": "2"}, True),
    ("(a = 1 OR a = 2) AND b IS NOT NULL", {"a": "2", "b": "z"}, True),
    # NOT binds tighter than IS in RocketMQ's grammar: (NOT b) IS NULL, never true for a set b
    ("NOT b IS NULL", {"b": "z"}, False),
    # booleans and keyword case
    ("flag = TRUE", {"flag": "true"}, True),
    ("flag = true", {"flag": "TRUE"}, True),
    ("flag = TRUE", {"flag": "yes"}, False),
    ("TRUE", {}, True),
    ("FALSE OR a iS nUlL", {}, True),
    # CONTAINS / STARTSWITH / ENDSWITH (RocketMQ 5 additions; null is FALSE, even negated)
    ("s CONTAINS 'bc'", {"s": "abcd"}, True),
    ("s NOT CONTAINS 'bc'", {"s": "abcd"}, False),
    ("s NOT CONTAINS 'bc'", {}, False),
    ("s STARTSWITH 'ab'", {"s": "abcd"}, True),
    ("s ENDSWITH 'cd'", {"s": "abcd"}, True),
    ("s NOT ENDSWITH 'x'", {"s": "abcd"}, True),
    # comments and whitespace
    ("a = 1 /* block */ AND -- line\n b = 2", {"a": "1", "b": "2"}, True),
])
def test_evaluates_like_rocketmq(sql: str, props: dict[str, str], expected: object) -> None:
    assert compile_sql92(sql).evaluate(props) is expected
    assert compile_sql92(sql).matches(props) is (expected is True)


@pytest.mark.parametrize(("sql", "props"), [
    ("a > 5", {"a": "abc"}),  # not a number: Java's conversion throws, the filter says no
    ("a = 5", {"a": "5.5"}),  # Integer.valueOf("5.5") throws
    ("a = 5", {"a": " 5"}),  # Integer.valueOf does not trim
    ("a > b", {"a": "x", "b": "1"}),
    ("a = 1 AND b > 2", {"a": "1", "b": "two"}),
])
def test_conversion_errors_never_match(sql: str, props: dict[str, str]) -> None:
    e = compile_sql92(sql)
    assert e.evaluate(props) is None
    assert not e.matches(props)


@pytest.mark.parametrize(("sql", "reason"), [
    ("", "empty"),
    ("   ", "empty"),
    ("a >", "end of expression"),
    ("a = 1 b", "'b' at column 7"),  # trailing text (Java would ignore it; we refuse)
    ("a > 'x'", "cannot be compared"),  # strings cannot be ordered
    ("a < TRUE", "cannot be compared"),
    ("a = NULL", "cannot be compared"),
    ("TRUE = 'x'", "cannot be compared with"),
    ("5", "will not result in a boolean value"),
    ("a + 1", "'+' at column 3"),  # no arithmetic in RocketMQ's grammar
    ("a IN (1, 2)", "string literal"),
    ("a IN ()", "string literal"),
    ("'x' IN ('x')", "Expected a property for In expression"),
    ("a BETWEEN 3 AND 1", "Illegal values of between"),
    ("a BETWEEN 1", "AND"),
    ("a = 'unterminated", "Unterminated string"),
    ("a != 1", "unexpected '!'"),
    ("a == 1", "'=' at column 4"),
    ("a = 07", "'7'"),  # no leading zeros
    ("a > 0.0", "less than 4.9E-324"),  # RocketMQ's own quirk: 0.0 is below Double.MIN_VALUE
    ("a = 99999999999999999999", "out of the range of a long"),
    ("(a = 1", "')'"),
    ("a IS 1", "NULL"),
    ("a CONTAINS b", "string literal"),
])
def test_bad_expressions_are_refused_with_a_reason(sql: str, reason: str) -> None:
    with pytest.raises(FilterError, match="Invalid MessageSelector") as info:
        compile_sql92(sql)
    assert reason in str(info.value)


def test_cache_keeps_compiled_selectors_and_their_failures() -> None:
    assert compile_cached("k = 'v'") is compile_cached("k = 'v'")
    for _ in range(2):
        with pytest.raises(FilterError):
            compile_cached("k =")


def test_filter_records_reads_properties_from_stored_records() -> None:
    def record(**props: str) -> bytes:
        return encode_record(MessageExt(topic="T", body=b"x", properties=props))

    kept = filter_records([record(a="1"), record(a="9"), b"\x00\x00\x00\x05junk", record()], compile_sql92("a > 5"))
    assert kept == [record(a="9")]


@pytest.mark.parametrize(("born", "store", "flags"), [
    (("127.0.0.1", 1), ("127.0.0.1", 2), 0),
    (("::1", 1), ("127.0.0.1", 2), BORNHOST_V6_FLAG),
    (("127.0.0.1", 1), ("fe80::1", 2), STOREHOSTADDRESS_V6_FLAG),
    (("::1", 1), ("fe80::1", 2), BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG),
])
@pytest.mark.parametrize("props", [{}, {"a": "1"}, {"a": "1", "region": "eu", "TAGS": "T"}])
def test_record_properties_agree_with_the_full_decoder(born: tuple[str, int], store: tuple[str, int], flags: int,
                                                       props: dict[str, str]) -> None:
    buf = encode_record(MessageExt(topic="SomeTopic", body=b"b" * 300, sys_flag=flags, born_host=born,
                                   store_host=store, properties=props))
    assert record_properties(buf) == decode_record(buf).properties == props


def test_message_selector() -> None:
    assert MessageSelector.by_sql("a > 1") == MessageSelector(ExpressionType.SQL92, "a > 1")
    assert MessageSelector.by_tag("A || B").expression == "A || B"
    assert MessageSelector.by_tag(None).expression == SUB_ALL
    with pytest.raises(ValueError, match="SQL92"):
        MessageSelector.by_sql(" ")


def test_build_subscription_for_sql_has_no_tag_filter() -> None:
    from rocketmq_py.client.lite_pull_consumer import build_subscription

    sub = build_subscription("T", MessageSelector.by_sql("a > 1"))
    assert (sub.expressionType, sub.subString, sub.tagsSet, sub.codeSet) == ("SQL92", "a > 1", [], [])
    tag = build_subscription("T", MessageSelector.by_tag("A || B"))
    assert (tag.expressionType, tag.tagsSet) == ("TAG", ["A", "B"])


# -- properties -----------------------------------------------------------------------------

_values = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(_values, _values, _values)
def test_numeric_comparisons_agree_with_python(a: int, lo: int, hi: int) -> None:
    props = {"a": str(a)}
    assert ev(f"a > {lo}", **props) is (a > lo)
    assert ev(f"a <= {lo}", **props) is (a <= lo)
    assert ev(f"a = {lo}", **props) is (a == lo)
    assert ev(f"a <> {lo}", **props) is (a != lo)
    low, high = min(lo, hi), max(lo, hi)
    assert ev(f"a BETWEEN {low} AND {high}", **props) is (low <= a <= high)
    assert ev(f"a NOT BETWEEN {low} AND {high}", **props) is not (low <= a <= high)


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), st.integers(min_value=1, max_value=10**6))
def test_double_literals_compare_numerically(a: float, lit: int) -> None:
    assert ev(f"a < {lit}.5", a=repr(a)) is (a < lit + 0.5)


_truth = st.sampled_from([True, False, None])
_atoms = {True: "x = '1'", False: "x = '2'", None: "missing = '1'"}


@given(_truth, _truth)
def test_and_or_not_are_three_valued(p: bool | None, q: bool | None) -> None:
    def sql_and(x: bool | None, y: bool | None) -> bool | None:
        return False if False in (x, y) else None if None in (x, y) else True

    def sql_or(x: bool | None, y: bool | None) -> bool | None:
        return True if True in (x, y) else None if None in (x, y) else False

    assert ev(f"{_atoms[p]} AND {_atoms[q]}", x="1") is sql_and(p, q)
    assert ev(f"{_atoms[p]} OR {_atoms[q]}", x="1") is sql_or(p, q)
    assert ev(f"NOT ({_atoms[p]})", x="1") is (None if p is None else not p)


_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


@given(_text, st.lists(_text, min_size=1, max_size=6))
def test_string_equality_and_in_with_any_text(value: str, members: list[str]) -> None:
    def quote(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    assert ev(f"s = {quote(value)}", s=value) is True
    assert ev(f"s IN ({', '.join(map(quote, members))})", s=value) is (value in members)


@given(st.text(max_size=40))
def test_any_text_compiles_or_raises_filter_error(text: str) -> None:
    try:
        compile_sql92(text).evaluate({"a": "1"})
    except FilterError:
        pass
