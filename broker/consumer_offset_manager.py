"""Committed consumer offsets, ``config/consumerOffset.json`` (docs/store-formats.md#config-files).

Keys are ``topic@group``; each maps queue id -> the NEXT offset to consume. Java writes the
queue ids unquoted (fastjson); we read both forms and write standard JSON, which Java reads too.
"""

from __future__ import annotations

import json
import os

from rocketmq_py.broker.config_manager import ConfigManager
from rocketmq_py.remoting.protocol import json_body

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigManager):
    def __init__(self, store_path_root: str) -> None:
        self._path = os.path.join(store_path_root, "config", "consumerOffset.json")
        self.offset_table: dict[str, dict[int, int]] = {}

    def config_file_path(self) -> str:
        return self._path

    def encode(self) -> str:
        table = {key: {str(q): off for q, off in sorted(queues.items())} for key, queues in self.offset_table.items()}
        return json.dumps({"offsetTable": table}, indent=4)

    def decode(self, text: str) -> None:
        try:
            raw = json_body.loads(text)
            table = {str(key): {int(q): int(off) for q, off in queues.items()}
                     for key, queues in raw.get("offsetTable", {}).items()}
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"bad consumer offset table: {exc}") from None
        self.offset_table = table

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offset_table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        queues = self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {t for t, g in (k.split(TOPIC_GROUP_SEPARATOR, 1) for k in self.offset_table) if g == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {g for t, g in (k.split(TOPIC_GROUP_SEPARATOR, 1) for k in self.offset_table) if t == topic}

    def remove_offset(self, group: str) -> None:
        for key in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group]:
            del self.offset_table[key]

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic]:
            del self.offset_table[key]

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        queues = self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{src_group}")
        if queues is not None:
            self.offset_table[f"{topic}{TOPIC_GROUP_SEPARATOR}{dest_group}"] = dict(queues)
