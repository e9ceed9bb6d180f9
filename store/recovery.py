"""Store recovery at start: where the CommitLog's valid records end (Java's recoverNormally and
recoverAbnormally), the consume queues and index rebuilt from the log past what they hold
(Java's reput from the queues' end), and the torn tail zeroed.

Dispatching is idempotent, so a crash at any point loses nothing that was acknowledged.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from typing import TYPE_CHECKING

from rocketmq_py.remoting.protocol.message import MESSAGE_MAGIC_CODE
from rocketmq_py.store.index_dispatch import CHILD_SUPPORTED, read_indexed_offset
from rocketmq_py.store.mapped_file import MappedFile

if TYPE_CHECKING:
    from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.store")

NEVER = 1 << 62  # an offset no record reaches


class StoreRecovery:
    """One recovery of a loaded store: consume queues, CommitLog end, then the reput."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self.commit_log = store.commit_log
        self.dispatcher = store.dispatcher

    def recover(self, last_exit_ok: bool) -> int:
        """Recovers; where the index child should resume (0 when the index is built inline)."""
        config = self.store.config
        child = config.messageIndexEnable and config.messageIndexInChildProcess and CHILD_SUPPORTED
        dispatcher = self.dispatcher
        inline, dispatcher.index_inline = dispatcher.index_inline, dispatcher.index_inline and not child
        try:
            self._recover_logs(last_exit_ok)
        finally:
            dispatcher.index_inline = inline
        if not child:
            return 0
        # The child builds what the index lacks, from where it ends, once the store starts:
        # where the last child stopped, or before that if IndexFiles are gone.
        indexed = read_indexed_offset(self.store.root) if last_exit_ok else None
        resume = self._index_resume_offset()
        return resume if indexed is None else min(indexed, resume)

    def _recover_logs(self, last_exit_ok: bool) -> None:
        table = self.store.consume_queue_table
        commit_log = self.commit_log
        max_phy_of_cq = 0
        for queues in table.values():
            for cq in queues.values():
                cq.recover()
                max_phy_of_cq = max(max_phy_of_cq, cq.max_physic_offset)
        self._recover_commit_log(normal=last_exit_ok)
        end = commit_log.max_offset
        if max_phy_of_cq > end:
            log.warning("maxPhyOffsetOfConsumeQueue(%d) >= processOffset(%d), truncate dirty logic files",
                        max_phy_of_cq, end)
            for queues in table.values():
                for cq in queues.values():
                    cq.truncate_dirty_logic_files(end)
        if not commit_log.queue.files:
            for queues in table.values():
                for cq in queues.values():
                    cq.destroy()
            table.clear()
        # Like Java's reput start: queues (or the index) missing records the log holds -- deleted
        # by hand, or never flushed before a crash -- are rebuilt from the log.
        reput_from = max([commit_log.min_offset, self.store.index_service.max_phy_offset] + [
            cq.max_physic_offset for qs in table.values() for cq in qs.values()])
        if self._any_queue_missing() or reput_from < commit_log.max_offset:
            self._reput(commit_log.min_offset if self._any_queue_missing() else reput_from)
        indexed = read_indexed_offset(self.store.root)
        if last_exit_ok and self.dispatcher.index_inline and indexed is not None \
                and max(indexed, commit_log.min_offset) < commit_log.max_offset:
            # The index child stopped short of the end last time: finish its work here.
            self._reput(max(indexed, commit_log.min_offset), index_only=True)
        commit_log.queue.release_read_pages()  # what the scans read is the page cache's to keep or evict
        min_phy = commit_log.min_offset
        queue_table = commit_log.topic_queue_table
        queue_table.clear()
        for topic, queues in table.items():
            for qid, cq in queues.items():
                queue_table[(topic, qid)] = cq.max_offset_in_queue
                cq.correct_min_offset(min_phy)

    def _any_queue_missing(self) -> bool:
        """True when the log holds records but no consume queue survived at all."""
        return self.commit_log.max_offset > self.commit_log.min_offset and not any(
            cq.queue.files for qs in self.store.consume_queue_table.values() for cq in qs.values())

    def _reput(self, from_offset: int, index_only: bool = False) -> None:
        """Dispatch every record from ``from_offset`` to the end of the log (idempotent)."""
        for mf in self.commit_log.queue.files:
            if mf.file_from_offset + mf.wrote_position <= from_offset:
                continue
            pos = max(0, from_offset - mf.file_from_offset)
            while pos < mf.wrote_position:
                # Mapped again per record: dispatching may create files and release this mapping.
                size, msg, valid = self.commit_log.check_record(mf.mapping(), pos, mf.wrote_position
                                                                if mf.wrote_position < mf.file_size else mf.file_size)
                if not valid or size <= 0:
                    break
                if msg is not None:
                    if index_only:
                        self.dispatcher.build_index(msg)
                    else:
                        self.dispatcher.dispatch(msg, size, notify=False)
                    pos += size
                else:
                    break
        log.info("reput from %d done", from_offset)

    def _recover_commit_log(self, normal: bool) -> None:
        """Find where the log's valid records end, from the file Java's recovery starts at.

        Normal: the last three files, checked only. Abnormal (recoverAbnormally): from the
        newest file whose first record is no newer than the checkpoint says is durable
        everywhere (isMappedFileMatchedRecover), re-dispatching what the queues lack: a record
        whose queue offset its ConsumeQueue already holds is skipped, as Java's
        putMessagePositionInfo skips it, but without decoding it first."""
        commit_log = self.commit_log
        files = commit_log.queue.files
        if not files:
            return
        if normal:
            start = max(0, len(files) - 3)
        else:
            start = self._abnormal_recovery_start(files)
        pending = None if normal else {(cq.topic.encode(), qid): cq.max_offset_in_queue
                                       for qs in self.store.consume_queue_table.values() for qid, cq in qs.items()}
        # The index child, when there is one, resumes where the index ends (start()); inline,
        # the records past that end are indexed here.
        index_from = NEVER if normal or not self.dispatcher.index_inline else self._index_resume_offset()
        end_offset = files[start].file_from_offset
        for mf in files[start:]:
            pos, whole, to_dispatch = commit_log.scan_records(mf.mapping(), 0, mf.file_size, pending,
                                                              index_from, mf.file_from_offset)
            for at in to_dispatch:
                # Mapped again per record: dispatching may create files and release this mapping.
                size, msg, valid = commit_log.check_record(mf.mapping(), at, mf.file_size)
                if msg is None or not valid:  # properties that are not UTF-8: the log ends here
                    pos, whole = at, False
                    break
                self.dispatcher.dispatch(msg, size, notify=False)
            end_offset = mf.file_from_offset + pos
            if not whole:
                break
        # Zero the torn tail so a later scan never mistakes stale bytes for records.
        for mf in files:
            if mf.file_from_offset <= end_offset < mf.file_from_offset + mf.file_size:
                zero_from(mf, end_offset - mf.file_from_offset)
        commit_log.queue.set_position(end_offset)
        log.info("recover commit log %s from file %d, end offset %d", "normally" if normal else "abnormally",
                 files[start].file_from_offset, end_offset)

    def _abnormal_recovery_start(self, files: list[MappedFile]) -> int:
        """The index of the newest file whose first record was stored no later than the
        checkpoint's minimum (Java's isMappedFileMatchedRecover); the first file if none is."""
        store = self.store
        assert store.checkpoint is not None
        min_ts = store.checkpoint.min_timestamp(store.config.messageIndexEnable and store.config.messageIndexSafe)
        for i in range(len(files) - 1, -1, -1):
            ts = self.commit_log.pickup_store_timestamp(files[i].file_from_offset, 92)
            if 0 < ts <= min_ts:
                return i
        return 0

    def _index_resume_offset(self) -> int:
        """Where indexing resumes after a crash: past the last record the surviving IndexFiles
        hold (its entries are there; IndexService.load dropped any file newer than the
        checkpoint), or the log's start when no IndexFile survived."""
        index_service = self.store.index_service
        end = index_service.max_phy_offset
        if not index_service.files or end < self.commit_log.min_offset:
            return self.commit_log.min_offset
        data = self.commit_log.get_data(end, 8)
        if data is None:
            return end
        size, magic = struct.unpack(">ii", data)
        return end + size if magic == MESSAGE_MAGIC_CODE and size > 0 else end


_ZERO_CHUNK = bytes(1 << 20)


def zero_from(mf: MappedFile, pos: int) -> None:
    """Zero ``mf`` from ``pos`` to its end where it holds data. Holes (a file is created sparse,
    or reserved without being written) already read as zeros: writing them would allocate and
    dirty what is left of a 1 GiB file, seconds of a recovery that found a 100 MB log. Where the
    file system cannot say where its holes are, everything from ``pos`` is zeroed."""
    size = mf.file_size
    mm = mf.mapping()
    fd = os.open(mf.path, os.O_RDONLY)  # for SEEK_DATA: mapped files keep no descriptor
    try:
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
                hole = min(os.lseek(fd, data, os.SEEK_HOLE), size) if data < size else size
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data past pos
                    return
                data, hole = pos, size  # SEEK_DATA not supported here
            except AttributeError:  # no SEEK_DATA on this platform
                data, hole = pos, size
            for start in range(data, hole, len(_ZERO_CHUNK)):
                stop = min(start + len(_ZERO_CHUNK), hole)
                mm[start:stop] = _ZERO_CHUNK[:stop - start]
            pos = hole
    finally:
        os.close(fd)
