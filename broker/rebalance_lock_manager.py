"""Broker-side queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

One client id per (group, queue). A lock lives 60 s from its holder's last lock call
(``rocketmq.broker.rebalance.lockMaxLiveTime``); clients renew every 20 s, so a crashed holder
frees its queues within a minute while a live one never loses them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

log = logging.getLogger("rocketmq.broker")

REBALANCE_LOCK_MAX_LIVE_TIME = 60.0

# (topic, brokerName, queueId)
MessageQueueKey = tuple[str, str, int]


class _LockEntry:
    __slots__ = ("client_id", "last_update")

    def __init__(self, client_id: str, now: float) -> None:
        self.client_id = client_id
        self.last_update = now


class RebalanceLockManager:
    def __init__(self, lock_max_live_time: float = REBALANCE_LOCK_MAX_LIVE_TIME) -> None:
        self.lock_max_live_time = lock_max_live_time
        self._table: dict[str, dict[MessageQueueKey, _LockEntry]] = {}

    def _live(self, entry: _LockEntry, now: float) -> bool:
        return now - entry.last_update <= self.lock_max_live_time

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueueKey], client_id: str,
                       now: float | None = None) -> set[MessageQueueKey]:
        """Lock or renew what is free or already ours; returns every queue this client now holds."""
        now = time.monotonic() if now is None else now
        table = self._table.setdefault(group, {})
        locked: set[MessageQueueKey] = set()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None or not self._live(entry, now):
                if entry is not None:
                    log.warning("tryLockBatch: remove expired lock, group=%s mq=%s old client=%s new client=%s",
                                group, mq, entry.client_id, client_id)
                table[mq] = _LockEntry(client_id, now)
                locked.add(mq)
            elif entry.client_id == client_id:
                entry.last_update = now
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueueKey], client_id: str) -> None:
        table = self._table.get(group)
        if not table:
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
        if not table:
            del self._table[group]

    def is_locked(self, group: str, mq: MessageQueueKey, client_id: str, now: float | None = None) -> bool:
        entry = self._table.get(group, {}).get(mq)
        now = time.monotonic() if now is None else now
        return entry is not None and entry.client_id == client_id and self._live(entry, now)
