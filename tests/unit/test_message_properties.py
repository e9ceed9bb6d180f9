"""The message properties string (docs/store-formats.md#properties-string: name\\x01value pairs joined by \\x02)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.message import (
    find_property,
    find_raw_property,
    properties_to_string,
    raw_property_prefix,
    string_to_properties,
)

_text = st.text(alphabet=st.sampled_from("ab\x01\x02=é"), max_size=30)
_names = st.text(alphabet=st.characters(blacklist_characters="\x01\x02"), min_size=1, max_size=12)
_values = st.text(alphabet=st.characters(blacklist_characters="\x02"), min_size=1, max_size=12)


def reference(text: str) -> dict[str, str]:
    """Entry by entry: a name, a separator and a non-empty value, or the entry is skipped."""
    props = {}
    for entry in text.split("\x02") if text else []:
        name, sep, value = entry.partition("\x01")
        if sep and name and value:
            props[name] = value
    return props


@given(_text)
def test_parsing_any_text_matches_the_entry_rules(text: str) -> None:
    assert string_to_properties(text) == reference(text)


@given(st.dictionaries(_names, _values, max_size=6))
def test_round_trip(props: dict[str, str]) -> None:
    assert string_to_properties(properties_to_string(props)) == props


def test_no_trailing_separator_and_none_values_skipped() -> None:
    assert properties_to_string({"TAGS": "a", "KEYS": "k"}) == "TAGS\x01a\x02KEYS\x01k"
    assert properties_to_string({"TAGS": "a", "KEYS": None}) == "TAGS\x01a"  # type: ignore[dict-item]
    assert string_to_properties("TAGS\x01a\x02\x02KEYS\x01\x02\x01v\x02X\x01y") == {"TAGS": "a", "X": "y"}


@given(st.dictionaries(_names, _values, max_size=6), _names)
def test_find_property_agrees_with_the_parsed_dict(props: dict[str, str], name: str) -> None:
    text = properties_to_string(props)
    for n in [*props, name]:
        assert find_property(text, n) == string_to_properties(text).get(n)


def test_find_property_matches_whole_names_only() -> None:
    props = "MYKEYS\x01fake\x02KEYS\x01a b\x02UNIQ_KEY\x01U1"
    assert find_property(props, "KEYS") == "a b"
    assert find_property(props, "UNIQ_KEY") == "U1"
    assert find_property("KEYS\x01\x02X\x01y", "KEYS") is None
    assert find_property("X\x01y", "KEYS") is None


@given(st.lists(st.tuples(st.sampled_from(["KEYS", "MYKEYS", "K", "é"]), st.sampled_from(["", "v", "w", "é"])),
                max_size=6), st.sampled_from(["KEYS", "K", "é", "X"]))
def test_repeated_names_and_raw_bytes_agree_with_the_parsed_dict(pairs: list[tuple[str, str]], name: str) -> None:
    """A batch entry's own properties followed by the header's can repeat a name: the last
    non-empty one counts, in the string and in the UTF-8 bytes a record holds."""
    text = "\x02".join(f"{n}\x01{v}" for n, v in pairs)
    expected = string_to_properties(text).get(name)
    assert find_property(text, name) == expected
    assert find_raw_property(text.encode(), raw_property_prefix(name)) == (expected or "").encode()
