"""OffsetStore: where a consumer's committed offsets live (Java's consumer/store package).

A clustering group's offsets are the broker's (RemoteBrokerOffsetStore): one per (group, queue),
read with QUERY_CONSUMER_OFFSET and written with UPDATE_CONSUMER_OFFSET. Each member of a
broadcasting group reads every queue, so the broker cannot hold one offset per (group, queue)
for them all: each client persists its own (LocalFileOffsetStore) under
``~/.rocketmq_offsets/<clientId>/<group>/offsets.json`` (``rocketmq.client.localOffsetStoreDir``),
in fastjson's MessageQueue-keyed form, written atomically.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.common.atomic_file import load_with_backup, write_file_atomically
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.broker import decode_mq_keyed, encode_mq_keyed

if TYPE_CHECKING:
    from rocketmq_py.client.instance import MQClientInstance
    from rocketmq_py.client.process_queue import ProcessQueue

log = logging.getLogger("rocketmq.client")


class OffsetStore(Protocol):
    async def read_offset(self, mq: MessageQueue) -> int:
        """The committed offset of ``mq``, -1 when there is none."""
        ...

    async def persist_all(self, queues: Sequence[ProcessQueue], timeout: float | None = None) -> None:
        """Commit the consumed offsets of ``queues`` (those that consumed anything)."""
        ...


def local_offset_store_dir() -> str:
    """Java's rocketmq.client.localOffsetStoreDir, here an environment variable."""
    return os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR",
                          os.path.join(os.path.expanduser("~"), ".rocketmq_offsets"))


class LocalFileOffsetStore:
    """A broadcasting member's offsets, in its own file."""

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

    async def read_offset(self, mq: MessageQueue) -> int:
        return self.read(mq)

    async def persist_all(self, queues: Sequence[ProcessQueue], timeout: float | None = None) -> None:
        for pq in queues:
            if pq.consumed_offset >= 0:
                self.update(pq.mq, pq.consumed_offset)
        await asyncio.to_thread(self.persist)


class RemoteBrokerOffsetStore:
    """A clustering group's offsets, kept by the master of each queue's broker (a slave while
    the master is gone)."""

    def __init__(self, instance: MQClientInstance, group: str, set_zero_if_not_found: bool = True) -> None:
        self.instance = instance
        self.group = group
        # From a timestamp means from that time even on a young queue: the broker is asked (5.x's
        # setZeroIfNotFound) not to answer 0 for a group it has no offset for.
        self.set_zero_if_not_found = set_zero_if_not_found

    async def read_offset(self, mq: MessageQueue) -> int:
        extra = {"consumerGroup": self.group}
        if not self.set_zero_if_not_found:
            extra["setZeroIfNotFound"] = "false"
        return await self.instance.offset_request(RequestCode.QUERY_CONSUMER_OFFSET, mq, extra)

    async def persist_all(self, queues: Sequence[ProcessQueue], timeout: float | None = None) -> None:
        instance = self.instance
        wait = min(instance.config.mq_client_api_timeout, timeout or instance.config.mq_client_api_timeout)

        async def one(pq: ProcessQueue) -> None:
            mq = pq.mq
            addr = instance.find_broker_address_in_admin(mq.broker_name)
            if addr is None:
                return
            try:
                await instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": self.group, "topic": mq.topic, "queueId": str(mq.queue_id),
                    "commitOffset": str(pq.consumed_offset)}), wait)
            except RemotingError as exc:
                log.warning("commit offset of %s failed: %s", mq, exc)

        # In parallel: a hung broker costs one timeout, not one per queue.
        await asyncio.gather(*(one(pq) for pq in queues if pq.consumed_offset >= 0))
