"""Retention, by Java's names: CleanCommitLogService (CommitLog files past fileReservedTime
deleted at deleteWhen, or at once when the disk fills; the disk-full flag that refuses puts) and
CleanConsumeQueueService (the queues and index behind the deleted files)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import shutil
from typing import TYPE_CHECKING

from rocketmq_py.store.config import SCHEDULE_TOPIC
from rocketmq_py.store.mapped_file import DiskFullError

if TYPE_CHECKING:
    from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.store")


class CleanCommitLogService:
    """Expired CommitLog files deleted, and the disk watched: ``store.disk_full`` is set while
    usage is above diskSpaceWarningLevelRatio or less is free than a failed file creation wanted."""

    def __init__(self, store: DefaultMessageStore, clean_consume_queue: CleanConsumeQueueService) -> None:
        self.store = store
        self.clean_consume_queue = clean_consume_queue
        self.disk_full_remark = "the disk is full"
        self.space_needed = 0  # bytes a failed file creation wanted; puts wait until they are free

    async def run(self) -> None:
        # Java's first run is after 60 s; here the interval applies from the start so that
        # tests with a short interval see the disk flag move.
        while True:
            await asyncio.sleep(self.store.config.cleanResourceInterval / 1000)
            try:
                await self.clean_resources()
            except OSError as exc:  # out of descriptors, say: the next round tries again
                log.error("clean resources failed: %s", exc)

    async def clean_resources(self, now: dt.datetime | None = None) -> int:
        """One retention round: expired CommitLog files, then the queues and index behind them."""
        ratio = self.check_disk_space()
        cfg = self.store.config
        now = now or dt.datetime.now()
        forced = cfg.cleanFileForciblyEnable and ratio > cfg.diskSpaceCleanForciblyRatio
        if not (self._is_time_to_delete(now) or ratio > cfg.diskMaxUsedSpaceRatio / 100 or forced):
            return 0
        return self.delete_expired_files(now, forced)

    def _is_time_to_delete(self, now: dt.datetime) -> bool:
        return f"{now.hour:02d}" in {h.strip().zfill(2) for h in self.store.config.deleteWhen.split(";") if h.strip()}

    def delete_expired_files(self, now: dt.datetime, forced: bool) -> int:
        store = self.store
        cfg = store.config
        files = store.commit_log.queue.files
        expire_before = now.timestamp() - cfg.fileReservedTime * 3600
        deleted = 0
        # Never the last file: it is the one being written.
        while deleted < 10 and len(files) > deleted + 1:
            mf = files[deleted]
            if not forced and os.path.getmtime(mf.path) > expire_before:
                break
            deleted += 1
        if deleted:
            removed = store.commit_log.queue.delete_first_files(deleted)
            names = [os.path.basename(m.path) for m in removed]
            if forced:
                # Java's cleanAtOnce: files go whatever their age, unconsumed messages with them.
                log.warning("disk usage above diskSpaceCleanForciblyRatio %.2f: forcibly deleted commit log files "
                            "%s holding offsets [%d, %d)", cfg.diskSpaceCleanForciblyRatio, names,
                            removed[0].file_from_offset, removed[-1].file_from_offset + removed[-1].file_size)
            else:
                log.info("deleted %d expired commit log files: %s", deleted, names)
            self.clean_consume_queue.delete_expired_files(store.commit_log.min_offset)
        return deleted

    def _disk_usage(self) -> tuple[int, int, int]:
        """(total, used, free) bytes of the CommitLog's filesystem."""
        store = self.store
        total, used, free = shutil.disk_usage(store.config.commit_log_dir()
                                              if os.path.isdir(store.config.commit_log_dir()) else store.root)
        return total, used, free

    def disk_usage_ratio(self) -> float:
        total, used, _ = self._disk_usage()
        return used / total if total else 0.0

    def check_disk_space(self) -> float:
        """Refresh the disk-full flag: puts are refused while usage is above the warning ratio, or
        while less is free than a file whose creation failed wanted."""
        store = self.store
        total, used, free = self._disk_usage()
        ratio = used / total if total else 0.0
        warning = ratio > store.config.diskSpaceWarningLevelRatio
        full = warning or free < self.space_needed
        if full != store.disk_full:
            if full:
                log.error("physic disk maybe full soon, so reclaim space, %.2f, store will refuse new messages",
                          ratio)
            else:
                log.info("physic disk space OK %.2f, store accepts messages again", ratio)
        if warning:
            self.disk_full_remark = (f"the disk is full: usage {ratio:.2f} above diskSpaceWarningLevelRatio "
                                     f"{store.config.diskSpaceWarningLevelRatio}")
        if not full:
            self.space_needed = 0
        store.disk_full = full
        return ratio

    def disk_filled(self, exc: DiskFullError) -> str:
        """A store file could not be made for want of space: puts are refused until
        ``check_disk_space`` sees the room it wanted. The remark puts answer with."""
        self.space_needed = max(self.space_needed, exc.needed)
        self.disk_full_remark = f"the disk is full: {exc.strerror}"
        if not self.store.disk_full:
            log.error("disk full, store will refuse new messages until %d bytes are free: %s", exc.needed,
                      exc.strerror)
        self.store.disk_full = True
        return self.disk_full_remark

    def space_check(self, needed: int) -> None:
        """Before a new store file: refused (DiskFullError) on a disk above the warning ratio.
        Not during recovery: the files it makes hold messages the log already has."""
        if self.store.shutdown_flag:
            return
        self.check_disk_space()
        if self.store.disk_full:
            raise DiskFullError(self.disk_full_remark, needed)


class CleanConsumeQueueService:
    """Consume-queue and index files whose records the CommitLog no longer holds, deleted."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store

    def delete_expired_files(self, min_phy: int) -> None:
        store = self.store
        for queues in store.consume_queue_table.values():
            for cq in queues.values():
                cq.delete_expired_files(min_phy)
        if store.index_dispatch is not None:
            store.index_dispatch.set_min_offset(min_phy)
        else:
            store.index_service.delete_expired(min_phy)

    def clean_expired_consumer_queue(self) -> int:
        """Queues whose every unit points below the CommitLog's first offset (their messages are
        gone) destroyed, except the delay levels'; how many (Java's cleanExpiredConsumerQueue)."""
        store = self.store
        min_phy = store.commit_log.min_offset
        removed = 0
        for topic, queues in list(store.consume_queue_table.items()):
            if topic == SCHEDULE_TOPIC:
                continue
            for qid, cq in list(queues.items()):
                last = cq.unit_at(cq.max_offset_in_queue - 1) if cq.max_offset_in_queue > 0 else None
                if last is not None and last[0] + last[1] < min_phy:
                    log.info("cleanExpiredConsumerQueue: %s %d consumer queue destroyed", topic, qid)
                    cq.destroy()
                    del queues[qid]
                    store.commit_log.topic_queue_table.pop((topic, qid), None)
                    removed += 1
            if not queues:
                del store.consume_queue_table[topic]
        return removed
