"""The broker's plain-send properties: string operations that must store what parsing would."""

from __future__ import annotations

import pytest

from broker.processors.send import _plain_properties
from remoting.protocol.message import string_to_properties

CLUSTER = ("C1", "\x02CLUSTER\x01C1", "CLUSTER\x01C1")


def _parsed(text: str) -> tuple[dict[str, str], bool]:
    """What the parsed path stores: the properties less WAIT, plus CLUSTER; and the WAIT."""
    props = string_to_properties(text)
    wait = props.pop("WAIT", "true") != "false"
    props["CLUSTER"] = "C1"
    return props, wait


@pytest.mark.parametrize("text", [
    "",
    "WAIT\x01true",
    "WAIT\x01false",
    "TAGS\x01a\x02WAIT\x01true",
    "WAIT\x01false\x02TAGS\x01a",
    "TAGS\x01a\x02WAIT\x01false\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U",
    "TAGS\x01a\x02",
    "TAGS\x01a\x02WAIT\x01false\x02",
    "WAIT\x01\x02TAGS\x01a",
    "TAGS\x01caf\u00e9",
])
def test_plain_properties_store_what_parsing_would(text: str) -> None:
    plain = _plain_properties(text, CLUSTER)
    assert plain is not None
    stored, wait = plain
    assert (string_to_properties(stored), wait) == _parsed(text)
    assert stored.endswith("CLUSTER\x01C1") and "WAIT\x01" not in stored
    assert "\x02\x02" not in stored


@pytest.mark.parametrize("text", [
    "DELAY\x013",                          # parked in the schedule topic
    "TRAN_MSG\x01true",                    # a half message
    "CLUSTER\x01theirs",                   # replaced by the broker's
    "TAGS\x01DELAY\x01",                   # a name inside a value: parsing decides
    "WAIT\x01true\x02WAIT\x01false",       # named twice
    "XWAIT\x01true",                       # not at an entry's start
])
def test_properties_that_change_what_is_stored_go_to_the_parsed_path(text: str) -> None:
    assert _plain_properties(text, CLUSTER) is None
