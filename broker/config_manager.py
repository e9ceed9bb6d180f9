"""Persisted broker tables (topics, subscription groups, consumer offsets): one JSON file each.

Files are written and read through ``common.atomic_file``: a crash never leaves a table
unreadable, and a broken file falls back to its ``.bak`` with a warning.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod

from rocketmq_py.common.atomic_file import load_with_backup, write_file_atomically

log = logging.getLogger("rocketmq.broker")


class ConfigManager(ABC):
    # persist_soon's writer and the futures waiting for its next write (made on first use).
    _persist_writer: asyncio.Task[None] | None = None
    _persist_waiters: list[asyncio.Future[None]] | None = None

    @abstractmethod
    def config_file_path(self) -> str: ...

    @abstractmethod
    def encode(self) -> str:
        """The table as JSON text (taken on the event loop, so it is a consistent snapshot)."""

    @abstractmethod
    def decode(self, text: str) -> None:
        """Replace the table with the file's content; raise ValueError if it is not valid."""

    def load(self) -> bool:
        """Load the file or its backup. False when both exist and neither is valid."""
        try:
            load_with_backup(self.config_file_path(), self.decode)
        except ValueError:
            return False
        return True

    def persist(self) -> None:
        write_file_atomically(self.config_file_path(), self.encode())

    async def persist_async(self) -> None:
        """Snapshot on the loop, write in a thread: fsync must never stall the event loop."""
        text = self.encode()
        await asyncio.to_thread(write_file_atomically, self.config_file_path(), text)

    def persist_soon(self) -> asyncio.Future[None] | None:
        """The table written by one writer on the event loop, changes that arrive while it writes
        taken together by its next write; the future is done once a write that includes every
        change made so far is on disk (an OSError if it failed). Without a running loop, written
        now (None).

        Java rewrites the whole file on every change, in the request's thread; here that was the
        event loop, and a table of 10,000 topics takes tens of milliseconds to encode and sync, so
        creating them one by one grew with their square. Coalesced, creations in flight together
        cost one write."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.persist()
            return None
        waiter: asyncio.Future[None] = loop.create_future()
        if self._persist_waiters is None:
            self._persist_waiters = []
        self._persist_waiters.append(waiter)
        if self._persist_writer is None or self._persist_writer.done():
            self._persist_writer = loop.create_task(self._write_while_changed(self._persist_waiters))
        return waiter

    async def _write_while_changed(self, waiters: list[asyncio.Future[None]]) -> None:
        while waiters:
            # Taken before the snapshot (persist_async encodes before its first await): these
            # waiters' changes are in it; later ones wait for the next round.
            batch = waiters[:]
            del waiters[:]
            try:
                await self.persist_async()
            except OSError as exc:
                log.error("persist %s failed: %s", self.config_file_path(), exc)
                for waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(exc)
                        waiter.exception()  # retrieved: a caller that did not wait sees it in the log
            else:
                for waiter in batch:
                    if not waiter.done():
                        waiter.set_result(None)

    async def persisted(self) -> None:
        """Until the writes ``persist_soon`` started are done (a shutdown's own write must not be
        overtaken by an older snapshot still being written)."""
        if self._persist_writer is not None:
            await self._persist_writer
