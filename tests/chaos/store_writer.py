"""A store writer to be killed: ``python store_writer.py ROOT FLUSH_TYPE``.

Puts messages until killed, from several concurrent tasks (so sync-flush group commit is under
load), and prints ``ACK <seq> <queueId> <queueOffset> <commitLogOffset>`` only after a put has
returned PUT_OK: every line printed is a message the store acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store.message_store import DefaultMessageStore, PutMessageStatus
from tests.store_helpers import message, small_config

WRITERS = 8
LIMIT = 200_000  # bounded even if nobody kills us


def body_for(seq: int) -> bytes:
    return (f"crash-test-message-{seq:08d}-".encode() * 8)[: 100 + seq % 400]


async def main(root: str, flush: str, start_seq: int) -> None:
    store = DefaultMessageStore(small_config(root, flushDiskType=flush, mappedFileSizeCommitLog=256 * 1024))
    await store.load()
    await store.start()
    print("READY", flush=True)
    seq = start_seq
    out = sys.stdout

    async def writer() -> None:
        nonlocal seq
        while seq < start_seq + LIMIT:
            mine = seq
            seq += 1
            r = await store.put_message(message("Crash", body_for(mine), queue_id=mine % 4, keys=f"seq{mine}",
                                                uniq=f"U{mine:010d}"))
            if r.status == PutMessageStatus.PUT_OK and r.append_result is not None:
                a = r.append_result
                out.write(f"ACK {mine} {mine % 4} {a.logics_offset} {a.wrote_offset}\n")
                out.flush()

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    await store.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
