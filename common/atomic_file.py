"""Crash-safe small files (config tables), as RocketMQ's MixAll.string2File writes them.

Write ``<file>.<thread>.tmp`` and fsync it, copy the current file to ``<file>.bak``, then rename the tmp
file over the original: a crash at any moment leaves the old or the new content readable, and a
torn or hand-mangled file can still be recovered from its backup. Shared by the broker's tables,
the NameServer's KV config, plain_acl.yml's updates and a client's local offsets, as Java's
MixAll is common to all of them.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger("rocketmq.common")

T = TypeVar("T")


def write_file_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    # One tmp file per writing thread: a table persisted on the event loop while a thread writes
    # an earlier snapshot of it (persist_async) must not rename the other's file away.
    tmp = f"{path}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.replace(tmp, path)


def load_with_backup(path: str, parse: Callable[[str], T]) -> T | None:
    """Parse the file, else its backup (with a warning); None when neither exists.

    Raises ValueError when both exist but neither parses: starting with an empty table would
    silently lose topics or offsets, so the caller must refuse to start instead.
    """
    failures = []
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        if not text.strip():
            failures.append(f"{candidate} is empty")
            log.warning("%s is empty, trying its backup", candidate)
            continue
        try:
            value = parse(text)
        except ValueError as exc:
            failures.append(f"{candidate}: {exc}")
            log.warning("%s is unparsable (%s), trying its backup", candidate, exc)
            continue
        if candidate != path:
            log.warning("loaded %s from its backup %s", path, candidate)
        return value
    if failures:
        raise ValueError("; ".join(failures))
    return None
