"""A store writer to be killed: ``python store_writer.py ROOT FLUSH_TYPE``.

Puts messages and batches until killed, from several concurrent tasks (so sync-flush group commit is under
load), and prints ``ACK <seq> <queueId> <queueOffset> <commitLogOffset>`` only after a put has
returned PUT_OK: every line printed is a message the store acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from rocketmq_py.store.commit_log import MessageExtBatch
from rocketmq_py.store.message_store import DefaultMessageStore, PutMessageStatus
from tests.store_helpers import STORE_HOST, message, small_config

WRITERS = 6
BATCH_WRITERS = 2
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
            await asyncio.sleep(0)  # an ASYNC_FLUSH put never suspends: let the other writers in

    async def batch_writer() -> None:
        """Batches of 4 for one queue: acknowledged together, each record on its own line."""
        nonlocal seq
        while seq < start_seq + LIMIT:
            first = seq
            seq += 4
            queue_id = first % 4
            r = await store.put_messages(MessageExtBatch("Crash", queue_id, [
                (0, body_for(n), f"KEYS\x01seq{n}\x02UNIQ_KEY\x01U{n:010d}".encode(), 0)
                for n in range(first, first + 4)], born_timestamp=1700000000123, born_host=("10.1.2.3", 5555),
                store_host=STORE_HOST))
            if r.status == PutMessageStatus.PUT_OK and r.append_result is not None:
                a = r.append_result
                out.write("".join(f"ACK {first + i} {queue_id} {a.logics_offset + i} {a.offsets[i]}\n"
                                  for i in range(4)))
                out.flush()
            await asyncio.sleep(0)

    await asyncio.gather(*(writer() for _ in range(WRITERS)), *(batch_writer() for _ in range(BATCH_WRITERS)))
    await store.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
