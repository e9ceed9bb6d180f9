"""Persisted broker tables (topics, subscription groups, consumer offsets): one JSON file each.

Written as RocketMQ's MixAll.string2File does, so a crash at any moment leaves a readable file:
write ``<file>.tmp`` (and fsync it), copy the current file to ``<file>.bak``, then rename the
tmp file over the original. Loading falls back to ``.bak`` when the file is missing, empty or
unparsable, with a warning, so one torn or hand-mangled file never loses the whole table.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from abc import ABC, abstractmethod

log = logging.getLogger("rocketmq.broker")


def write_file_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.replace(tmp, path)


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
        """Load the file, or its backup; True when either held a valid table or neither exists."""
        path = self.config_file_path()
        for candidate in (path, path + ".bak"):
            try:
                with open(candidate, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            if not text.strip():
                log.warning("%s is empty, trying its backup", candidate)
                continue
            try:
                self.decode(text)
            except ValueError as exc:
                log.warning("%s is unparsable (%s), trying its backup", candidate, exc)
                continue
            if candidate != path:
                log.warning("loaded %s from its backup %s", path, candidate)
            return True
        return not (os.path.exists(path) or os.path.exists(path + ".bak"))

    def persist(self) -> None:
        write_file_atomically(self.config_file_path(), self.encode())

    async def persist_async(self) -> None:
        """Snapshot on the loop, write in a thread: fsync must never stall the event loop."""
        text = self.encode()
        await asyncio.to_thread(write_file_atomically, self.config_file_path(), text)
