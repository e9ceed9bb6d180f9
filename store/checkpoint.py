"""StoreCheckpoint: store times of the last durable CommitLog record, queue unit and index entry.

One 4 KiB page (docs/store-formats.md#checkpoint). Abnormal recovery starts re-dispatching from the newest
CommitLog file whose first record is no newer than the oldest of these, minus 3 s.
"""

from __future__ import annotations

import mmap
import os
import struct

from rocketmq_py.store.mapped_file import reserve_blocks

_LAYOUT = struct.Struct(">qqq")
PAGE = 4096


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != PAGE:
                os.ftruncate(fd, PAGE)
                reserve_blocks(fd, PAGE)  # a page the disk cannot back would be a SIGBUS
            self.mm = mmap.mmap(fd, PAGE)
        finally:
            os.close(fd)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = _LAYOUT.unpack_from(self.mm)

    def min_timestamp(self, index_safe: bool = False) -> int:
        lowest: int = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            lowest = min(lowest, self.index_msg_timestamp)
        # Java backs off 3 s so records stored just before the checkpoint are re-checked too.
        return max(lowest - 3000, 0)

    def flush(self) -> None:
        _LAYOUT.pack_into(self.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        self.mm.flush()

    def close(self) -> None:
        self.flush()
        self.mm.close()
