"""Broadcasting consumers keep their offsets in a local file (Java's LocalFileOffsetStore).

Each member of a broadcasting group reads every queue, so the broker cannot hold one offset per
(group, queue) for them all: each client persists its own under
``~/.rocketmq_offsets/<clientId>/<group>/offsets.json`` (``rocketmq.client.localOffsetStoreDir``),
in fastjson's MessageQueue-keyed form, written atomically.
"""

from __future__ import annotations

import logging
import os

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.common.atomic_file import load_with_backup, write_file_atomically
from rocketmq_py.remoting.protocol.broker import decode_mq_keyed, encode_mq_keyed

log = logging.getLogger("rocketmq.client")



def local_offset_store_dir() -> str:
    """Java's rocketmq.client.localOffsetStoreDir, here an environment variable."""
    return os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR",
                          os.path.join(os.path.expanduser("~"), ".rocketmq_offsets"))


class LocalFileOffsetStore:
    def __init__(self, client_id: str, group: str, base_dir: str | None = None) -> None:
        self.path = os.path.join(base_dir or local_offset_store_dir(), client_id, group, "offsets.json")
        self.table: dict[MessageQueue, int] = {}

    def load(self) -> None:
        def parse(text: str) -> dict[MessageQueue, int]:
            try:
                raw = decode_mq_keyed(text.encode(), "offsetTable")
            except (ValueError, KeyError, IndexError) as exc:
                raise ValueError(f"bad offsets file: {exc}") from None
            return {MessageQueue(t, b, q): int(v) for (t, b, q), v in raw.items()}

        table = load_with_backup(self.path, parse)
        if table is not None:
            self.table = table

    def read(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    def update(self, mq: MessageQueue, offset: int) -> None:
        self.table[mq] = offset

    def persist(self) -> None:
        body = encode_mq_keyed("offsetTable", {(mq.topic, mq.broker_name, mq.queue_id): off
                                               for mq, off in self.table.items()})
        write_file_atomically(self.path, body.decode())
