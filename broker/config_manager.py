"""Persisted broker tables (topics, subscription groups, consumer offsets): one JSON file each.

Files are written and read through ``common.atomic_file``: a crash never leaves a table
unreadable, and a broken file falls back to its ``.bak`` with a warning.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod

from rocketmq_py.common.atomic_file import load_with_backup, write_file_atomically


class ConfigManager(ABC):
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
