"""Abnormal recovery of a CommitLog beside a bare CRC pass over the same records, in one run.

A writer process (this script with ``--write``) puts at least ``--mib`` MiB of 1 KiB messages
(TAGS, KEYS and UNIQ_KEY properties, 8 queues) into a store with the broker's defaults: 1 GiB
CommitLog files, so the log is one current file, and the index built by the store's child
process. Once it has written them it is killed with SIGKILL, the abort file left behind. Then:

- crc_pass_mb_per_s: the store's CRC-32 (``remoting.protocol.message.crc32``: ISA-L's, else
  zlib's) over every record's body, read from the same file through a
  read-only mapping, one call per record (the record boundaries found beforehand, untimed): the
  least work a CRC-checked recovery can do in Python;
- crc_chunk_mb_per_s (for information): the same CRC-32 over the same bytes in 8 MiB slices,
  with no per-record work at all;
- recovery_mb_per_s: ``DefaultMessageStore.load`` of the killed store, which recovers
  abnormally with ``checkCRCOnRecover`` on (every record's body CRC-checked), timed whole.

Each figure is the median of ``--rounds`` rounds, the passes and recoveries interleaved (a load
leaves the abort file behind, as a running store does, so every round recovers abnormally).
MB are 10^6 bytes of records. The recovered store must end where the writer's last put ended.

    .venv/bin/python bench/recovery.py [--mib 512] [--dir DIR]

Needs ``--mib`` plus about 10 % of free space in DIR (default: the system's temp dir); the
store is deleted afterwards. Last line: one JSON object with recovery_mb_per_s,
crc_pass_mb_per_s, ratio_recovery_vs_crc (and the informational figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocketmq_py.common.loop import run
from rocketmq_py.remoting.protocol.message import (
    BODY_LENGTH_AT,
    HOST_V6_FLAGS,
    SYS_FLAG_AT,
    MessageConst,
    crc32,
    properties_to_string,
    tags_string_to_tags_code,
)
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.store.message_store import DefaultMessageStore, PutMessageStatus

BODY = os.urandom(1024)
TOPIC = "RecoveryBench"
BORN_HOST, STORE_HOST = ("127.0.0.1", 50000), ("127.0.0.1", 10911)
RUN = 64  # messages per append, as the broker stores the sends of one read
QUEUES = 8
WRITE_TIMEOUT = 600.0


def config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=root, checkCRCOnRecover=True)


async def write(root: str, mib: int) -> None:
    """Put messages until the log holds ``mib`` MiB, say so, and wait to be killed."""
    store = DefaultMessageStore(config(root))
    await store.load()
    await store.start()
    tags_code = tags_string_to_tags_code("TagA")
    born_ts = int(time.time() * 1000)
    target = mib * 1024 * 1024
    seq = 0
    deadline = time.monotonic() + WRITE_TIMEOUT
    while store.commit_log.max_offset < target and time.monotonic() < deadline:
        entries = []
        for _ in range(RUN):
            props = properties_to_string({MessageConst.TAGS: "TagA", MessageConst.KEYS: f"key-{seq}",
                                          MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"7F00000100002A9F{seq:016X}"})
            entries.append((TOPIC, seq % QUEUES, BODY, 0, props.encode(), tags_code, 0, born_ts, 0, 0))
            seq += 1
        result = store.append_run(entries, BORN_HOST, STORE_HOST)
        if result.status is not PutMessageStatus.PUT_OK:
            raise SystemExit(f"put refused: {result.status}")
        await asyncio.sleep(0)  # the flush services run as they would in a broker
    print(f"WRITTEN {store.commit_log.max_offset} {seq}", flush=True)
    await asyncio.sleep(WRITE_TIMEOUT)  # killed long before this


def write_and_kill(root: str, mib: int) -> tuple[int, int, float]:
    """The writer's end offset, message count and seconds, after its SIGKILL."""
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--write", root, "--mib", str(mib)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line.startswith("WRITTEN "):
            raise SystemExit(f"the writer failed: {line!r}")
        _, end, count = line.split()
        took = time.monotonic() - began
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        proc.stdout.close()
    return int(end), int(count), took


def body_spans(path: str, end: int) -> list[tuple[int, int, int]]:
    """(body start, body end, stored CRC) of every record before ``end``."""
    spans = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = 0
        while pos < end:
            total, _, crc = struct.unpack_from(">iii", mm, pos)
            flags = struct.unpack_from(">i", mm, pos + SYS_FLAG_AT)[0]
            at = pos + BODY_LENGTH_AT[flags & HOST_V6_FLAGS]
            (body_len,) = struct.unpack_from(">i", mm, at)
            spans.append((at + 4, at + 4 + body_len, crc))
            pos += total
    return spans


def crc_passes(path: str, end: int, spans: list[tuple[int, int, int]]) -> tuple[float, float]:
    """Seconds of a per-record CRC pass (checked against the stored CRCs) and of a chunked one."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        with memoryview(mm) as view:
            began = time.perf_counter()
            bad = 0
            for start, stop, crc in spans:
                if crc32(view[start:stop]) & 0x7FFFFFFF != crc:
                    bad += 1
            per_record = time.perf_counter() - began
            if bad:
                raise SystemExit(f"{bad} records with a wrong CRC in a log the store wrote")
            began = time.perf_counter()
            for pos in range(0, end, 8 << 20):
                crc32(view[pos:min(pos + (8 << 20), end)])
            chunked = time.perf_counter() - began
    return per_record, chunked


def recover(root: str) -> tuple[float, int]:
    """Seconds of the killed store's load, and where its recovered log ends."""
    store = DefaultMessageStore(config(root))
    began = time.perf_counter()
    clean = store.load_sync()
    took = time.perf_counter() - began
    if clean:
        raise SystemExit("the writer was killed: its store must recover abnormally")
    end = store.commit_log.max_offset
    # Closed without start(): a start would spawn the index child to rebuild the index.
    store.commit_log.queue.close()
    for queues in store.consume_queue_table.values():
        for cq in queues.values():
            cq.queue.close()
    store.index_service.close()
    if store.checkpoint is not None:
        store.checkpoint.close()
    if store._lock_fd is not None:
        os.close(store._lock_fd)
    return took, end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512, help="MiB of messages to recover (at least 512 for the goal)")
    parser.add_argument("--rounds", type=int, default=3, help="CRC passes and recoveries, interleaved (medians)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the store is written, then deleted")
    parser.add_argument("--write", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        run(write(args.write, args.mib))
        return
    free = shutil.disk_usage(args.dir).free
    if free < args.mib * 1.1 * 1024 * 1024 + (1 << 30):
        raise SystemExit(f"{args.dir} has {free >> 20} MiB free; the bench needs {args.mib} MiB plus a 1 GiB file")
    root = tempfile.mkdtemp(prefix="rocketmq-recovery-bench-", dir=args.dir)
    try:
        end, count, write_s = write_and_kill(root, args.mib)
        print(f"writer: {count} messages, {end / 1e6:.0f} MB in {write_s:.1f} s, then SIGKILL")
        path = os.path.join(config(root).commit_log_dir(), f"{0:020d}")
        spans = body_spans(path, end)
        per_record, chunked, recoveries = [], [], []
        for _ in range(args.rounds):
            # Interleaved, so a machine busy with something else slows both alike. Each load
            # leaves the abort file as a running store does: every round recovers abnormally.
            crc_s, chunk_s = crc_passes(path, end, spans)
            per_record.append(crc_s)
            chunked.append(chunk_s)
            recovery_s, recovered_end = recover(root)
            if recovered_end != end:
                raise SystemExit(f"recovery ended the log at {recovered_end}, the writer's last put ended at {end}")
            recoveries.append(recovery_s)
        per_record_s, chunked_s, recovery_s = (statistics.median(x) for x in (per_record, chunked, recoveries))
        print("rounds: recovery " + " ".join(f"{t:.3f}" for t in recoveries) + " s, CRC pass "
              + " ".join(f"{t:.3f}" for t in per_record) + " s")
        mb = end / 1e6
        figures = {
            "log_mb": round(mb, 1),
            "messages": count,
            "recovery_s": round(recovery_s, 3),
            "recovery_mb_per_s": round(mb / recovery_s, 1),
            "crc_pass_mb_per_s": round(mb / per_record_s, 1),
            "crc_chunk_mb_per_s": round(mb / chunked_s, 1),
            "ratio_recovery_vs_crc": round(per_record_s / recovery_s, 3),
            "ratio_recovery_vs_crc_chunk": round(chunked_s / recovery_s, 3),
        }
        print(f"abnormal recovery (CRC on): {figures['recovery_mb_per_s']} MB/s ({recovery_s:.2f} s for {mb:.0f} MB)")
        print(f"bare crc32 per record:       {figures['crc_pass_mb_per_s']} MB/s")
        print(f"bare crc32 in 8 MiB:         {figures['crc_chunk_mb_per_s']} MB/s (information)")
        print(json.dumps(figures))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
