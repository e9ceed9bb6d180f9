"""Store append throughput with the dispatcher running, beside two ceilings measured in the same run.

Figures (1 KiB bodies with TAGS, KEYS and UNIQ_KEY properties, so ConsumeQueue units and index
entries are built for every message; the index is built by the store's child process, as Java's
reput thread does, and each timing ends only when it has caught up):
- puts_single_per_s: one put awaited at a time, ASYNC_FLUSH;
- puts_batch_msgs_per_s: batches of 32 for one queue, handed over as the broker hands a batch send
  (a MessageExtBatch: per entry its body and properties bytes), ASYNC_FLUSH;
- puts_sync_64_per_s: 64 concurrent writers under SYNC_FLUSH (group commit);
- bare_encode_per_s: a bare loop encoding the same records with ``struct`` and the store's CRC-32 into an
  mmap (no store logic);
- fsync_per_s: 4 KiB write + fsync on the same disk.

    .venv/bin/python bench/store_append.py [--seconds 3] [--rounds 3] [-o key=value ...]

The store runs on the event loop the daemons use (uvloop when installed).

Last line: one JSON object with the keys above and ratio_single_vs_bare, ratio_batch_vs_bare,
group_commit_factor (= puts_sync_64_per_s / fsync_per_s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocketmq_py.common.loop import run
from rocketmq_py.remoting.protocol.message import MessageConst, crc32, properties_to_string, tags_string_to_tags_code
from rocketmq_py.store.commit_log import MessageExtBatch, MessageExtBrokerInner
from rocketmq_py.store.config import FlushDiskType, MessageStoreConfig
from rocketmq_py.store.message_store import DefaultMessageStore

BODY = os.urandom(1024)
FILE_SIZE = 1024 * 1024 * 1024
BORN_HOST, STORE_HOST = ("127.0.0.1", 50000), ("127.0.0.1", 10911)
TAG_CODE = tags_string_to_tags_code("TagA")


def properties(i: int) -> str:
    return properties_to_string({MessageConst.TAGS: "TagA", MessageConst.KEYS: f"key-{i}",
                                 MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"7F00000100002A9F{i:016X}"})


def make_message(i: int) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic="BenchTopic", body=BODY, queue_id=i % 8, properties_string=properties(i),
                                 tags_code=tags_string_to_tags_code("TagA"), born_timestamp=int(time.time() * 1000),
                                 born_host=BORN_HOST, store_host=STORE_HOST)


def _settle(store: DefaultMessageStore) -> None:
    """Inside the timing: the index child has indexed every put, so figures are sustained rates."""
    if store.index_dispatch is not None and not store.index_dispatch.wait_indexed(60):
        raise RuntimeError("the index child did not catch up")


# Store settings from -o key=value, for A/B runs.
_OPTIONS: dict[str, str] = {}


async def _with_store(root: str, flush: FlushDiskType, body) -> float:  # type: ignore[no-untyped-def]
    store = DefaultMessageStore(MessageStoreConfig(storePathRootDir=root, flushDiskType=flush,  # type: ignore[arg-type]
                                                   mappedFileSizeCommitLog=FILE_SIZE, **_OPTIONS))
    await store.load()
    await store.start()
    try:
        return await body(store)
    finally:
        await store.shutdown()


def measure_single(root: str, seconds: float) -> float:
    async def body(store: DefaultMessageStore) -> float:
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                r = await store.put_message(make_message(n))
                if not r.ok:
                    raise RuntimeError(r)
                n += 1
        _settle(store)
        return n / (time.perf_counter() - t0)
    return run(_with_store(root, FlushDiskType.ASYNC_FLUSH, body))


def measure_batch(root: str, seconds: float) -> float:
    async def body(store: DefaultMessageStore) -> float:
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            # One queue's, as a MessageBatch is sent to one MessageQueue, and as the broker
            # hands it over: per entry its flag, body, properties (bytes) and tag hash.
            r = await store.put_messages(MessageExtBatch(
                "BenchTopic", n // 32 % 8, [(0, BODY, properties(n + k).encode(), TAG_CODE) for k in range(32)],
                born_timestamp=int(time.time() * 1000), born_host=BORN_HOST, store_host=STORE_HOST))
            if not r.ok:
                raise RuntimeError(r)
            n += 32
        _settle(store)
        return n / (time.perf_counter() - t0)
    return run(_with_store(root, FlushDiskType.ASYNC_FLUSH, body))


def measure_sync_64(root: str, seconds: float) -> float:
    async def body(store: DefaultMessageStore) -> float:
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds

        async def writer() -> None:
            nonlocal n
            while time.perf_counter() < deadline:
                r = await store.put_message(make_message(n))
                if not r.ok:
                    raise RuntimeError(r)
                n += 1

        await asyncio.gather(*(writer() for _ in range(64)))
        _settle(store)
        return n / (time.perf_counter() - t0)
    return run(_with_store(root, FlushDiskType.SYNC_FLUSH, body))


def measure_bare(root: str, seconds: float) -> float:
    """The same record bytes packed with struct and copied into a fresh mmap: no store logic."""
    path = os.path.join(root, "bare")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, FILE_SIZE)
    mm = mmap.mmap(fd, FILE_SIZE)
    head = struct.Struct(">iiiiiqqiq")
    tail = struct.Struct(">iqi")
    topic = b"BenchTopic"
    pos = n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    born = bytes([127, 0, 0, 1]) + struct.pack(">i", 50000)
    store = bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)
    while time.perf_counter() < deadline:
        # The next 100 records must fit: a fast machine fills the file before the deadline (their
        # properties only grow with n, so the 100th's size bounds them all).
        if pos + 100 * (91 + len(BODY) + len(topic) + len(properties(n + 99).encode())) > FILE_SIZE:
            break
        for _ in range(100):
            props = properties(n).encode()
            size = 91 + len(BODY) + len(topic) + len(props)
            rec = b"".join((head.pack(size, -626843481, crc32(BODY) & 0x7FFFFFFF, n % 8, 0, n, pos, 0, 0), born,
                            struct.pack(">q", 0), store, tail.pack(0, 0, len(BODY)), BODY, bytes((len(topic),)), topic,
                            struct.pack(">h", len(props)), props))
            mm[pos:pos + size] = rec
            pos += size
            n += 1
    rate = n / (time.perf_counter() - t0)
    mm.close()
    os.close(fd)
    os.remove(path)
    return rate


def measure_fsync(root: str, seconds: float) -> float:
    path = os.path.join(root, "fsync")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    block = os.urandom(4096)
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        os.write(fd, block)
        os.fsync(fd)
        n += 1
    rate = n / (time.perf_counter() - t0)
    os.close(fd)
    os.remove(path)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-o", "--store-option", action="append", default=[],
                        help="key=value of MessageStoreConfig (repeatable)")
    ns = parser.parse_args()
    _OPTIONS.update(opt.split("=", 1) for opt in ns.store_option)
    measures = {"bare_encode_per_s": measure_bare, "puts_single_per_s": measure_single,
                "puts_batch_msgs_per_s": measure_batch, "fsync_per_s": measure_fsync,
                "puts_sync_64_per_s": measure_sync_64}
    series: dict[str, list[float]] = {k: [] for k in measures}
    base = tempfile.mkdtemp(prefix="store-bench-", dir=os.environ.get("BENCH_DIR"))
    try:
        for rnd in range(ns.rounds):
            for key, fn in measures.items():
                root = os.path.join(base, f"{key}-{rnd}")
                os.makedirs(root)
                series[key].append(fn(root, ns.seconds))
                shutil.rmtree(root)
            print(f"round {rnd + 1}: " + "  ".join(f"{k}={v[-1]:,.0f}" for k, v in series.items()), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result: dict[str, float] = {k: round(statistics.median(v)) for k, v in series.items()}

    def ratio(a: str, b: str) -> float:
        return round(statistics.median(x / y for x, y in zip(series[a], series[b], strict=True)), 3)

    result["ratio_single_vs_bare"] = ratio("puts_single_per_s", "bare_encode_per_s")
    result["ratio_batch_vs_bare"] = ratio("puts_batch_msgs_per_s", "bare_encode_per_s")
    result["group_commit_factor"] = ratio("puts_sync_64_per_s", "fsync_per_s")
    print(f"medians of {ns.rounds} rounds, {ns.seconds}s each, 1 KiB messages:")
    for key, value in result.items():
        print(f"  {key:24s} {value:>12,}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
