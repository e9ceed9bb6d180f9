"""The store directory's lock: one running store per directory (Java's lock file)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("rocketmq.store")


class StoreLockedError(RuntimeError):
    """The store directory is held by another running store (Java's "Lock failed, MQ already
    started"): two writers on one CommitLog would corrupt it, so the second refuses to start."""

    def __init__(self, root: str) -> None:
        super().__init__(f"Lock failed, MQ already started: {root} is used by another store")
        self.root = root


def lock_store(root: str) -> int | None:
    """The descriptor holding ``root``'s lock file (Java's FileLock on ``lock``) until it is
    closed; None where flock does not exist."""
    try:
        import fcntl
    except ImportError:
        log.warning("the store lock is POSIX-only: nothing stops a second broker on %s here", root)
        return None
    fd = os.open(os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreLockedError(root) from None
    return fd
