"""Java's String.hashCode, which tag codes and index slots depend on, against known Java values
and a plain reference loop over UTF-16 code units."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.message import java_string_hash, tags_string_to_tags_code
from rocketmq_py.store.index_file import KeyHasher, key_hash, topic_key_hash


def reference(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def test_known_java_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\u65e5\u672c") == 26085 * 31 + 26412
    assert java_string_hash("\x7f\x00~") == (127 * 31 + 0) * 31 + 126


def test_min_value_hash_maps_to_slot_zero() -> None:
    # RocketMQ's IndexFile: Math.abs(Integer.MIN_VALUE) stays negative and is mapped to 0.
    assert key_hash("polygenelubricants") == 0


@given(st.text(max_size=80))
def test_matches_reference(s: str) -> None:
    assert java_string_hash(s) == reference(s)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40), st.text(max_size=40))
def test_topic_key_hash_is_hash_of_concatenation(topic: str, key: str) -> None:
    expected = reference(f"{topic}#{key}")
    assert topic_key_hash(topic, key) == (0 if expected == -(2**31) else abs(expected))


def test_tags_code_memo_agrees() -> None:
    assert tags_string_to_tags_code(None) == tags_string_to_tags_code("") == 0
    for _ in range(2):
        assert tags_string_to_tags_code("TagA") == reference("TagA")


def _expected_index_hash(topic: str, key: str) -> int:
    h = reference(f"{topic}#{key}")
    return 0 if h == -(2**31) else abs(h)


_ID_HEADS = st.sampled_from(["31FC43AD47EC26B4CE8C8119", "0A00000B5B2F", "\u00e9t\u00e9-", "", "K"])


@given(st.text(max_size=12),
       st.lists(st.tuples(_ID_HEADS, st.text(alphabet="0123456789ABCDEF\u00e9\u4e2d\x00\x7f", max_size=9)),
                min_size=1, max_size=40))
def test_key_hasher_agrees_with_the_hash_of_each_whole_key(topic: str, parts: list[tuple[str, str]]) -> None:
    """Keys sharing heads (a producer's ids: the head's hash kept, the tail added), short ones,
    non-ASCII ones and topics, one hasher for them all in turn."""
    hasher = KeyHasher(topic.encode())
    for head, tail in parts:
        key = head + tail
        assert hasher.hash(key.encode()) == _expected_index_hash(topic, key) == topic_key_hash(topic, key)


def test_key_hasher_keeps_a_bounded_number_of_heads() -> None:
    hasher = KeyHasher(b"T")
    keys = [f"{head:016X}{tail:03X}" for head in range(5000) for tail in (0, 4095)]
    for key in keys + keys[:50]:
        assert hasher.hash(key.encode()) == _expected_index_hash("T", key)
    assert len(hasher._heads) <= 4096
