"""Checks of JSON bodies against the properties of Java's classes (docs/admin-codes.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any


def assert_fields(obj: dict[str, Any], fields: Mapping[str, type], optional: Mapping[str, type] | None = None) -> None:
    """``obj`` has exactly ``fields`` (plus any of ``optional``), each of its JSON type."""
    optional = optional or {}
    assert set(fields) <= set(obj) <= set(fields) | set(optional), sorted(obj)
    for key, value in obj.items():
        kind = fields.get(key) or optional[key]
        assert type(value) is kind, f"{key}: {value!r} is not {kind.__name__}"


_MQ_KEY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:')


def loads_mq_keyed(body: bytes) -> Any:
    """Parse a body whose maps are keyed by MessageQueue objects (fastjson's form), the keys
    becoming ``topic|brokerName|queueId`` strings."""
    text = body.decode()
    assert _MQ_KEY.search(text) or "offsetTable\":{}" in text or "offsetTable" not in text
    return json.loads(_MQ_KEY.sub(lambda m: json.dumps(f"{m[3]}|{m[1]}|{m[2]}") + ":", text))
