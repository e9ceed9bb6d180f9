"""KV configuration kept by the NameServer (``kvConfig.json``), e.g. ORDER_TOPIC_CONFIG.

Persisted after every put or delete, with the broker tables' atomic write, and loaded at start;
a missing file is an empty table, an unreadable one falls back to its backup.
"""

from __future__ import annotations

import json
import logging

from rocketmq_py.common.atomic_file import load_with_backup, write_file_atomically
from rocketmq_py.remoting.protocol import json_body
from rocketmq_py.remoting.protocol.route import KVTable

log = logging.getLogger("rocketmq.namesrv")

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, kv_config_path: str) -> None:
        self.path = kv_config_path
        self.config_table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Load the table; raises ValueError when the file and its backup are both unreadable."""
        table = load_with_backup(self.path, _parse)
        if table is not None:
            self.config_table = table
            log.info("load KV config table OK, %d namespaces", len(table))

    def persist(self) -> None:
        write_file_atomically(self.path, json.dumps({"configTable": self.config_table}, indent=4))

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        table = self.config_table.setdefault(namespace, {})
        old = table.get(key)
        table[key] = value
        log.info("%s KV config %s %s %s", "replace" if old is not None else "put new", namespace, key, value)
        self.persist()

    def delete_kv_config(self, namespace: str, key: str) -> bool:
        table = self.config_table.get(namespace)
        if table is None or table.pop(key, None) is None:
            return False
        if not table:
            del self.config_table[namespace]
        log.info("delete KV config %s %s", namespace, key)
        self.persist()
        return True

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        return self.config_table.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> bytes | None:
        table = self.config_table.get(namespace)
        return KVTable(table=dict(table)).encode() if table else None

    def print_all(self) -> None:
        for namespace, table in self.config_table.items():
            for key, value in table.items():
                log.debug("configTable NS: %s Key: %s Value: %s", namespace, key, value)



def _parse(text: str) -> dict[str, dict[str, str]]:
    try:
        raw = json_body.loads(text)
        return {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in raw.get("configTable", {}).items()}
    except (AttributeError, TypeError) as exc:
        raise ValueError(f"bad KV config: {exc}") from None
