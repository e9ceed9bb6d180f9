"""CPU time per operation of the compiled hot paths, in this process (for bench/mypyc_ab.py).

Throughput through sockets and daemons moves with whatever else the machine runs; CPU time spent by
this process per operation moves far less, so the pure and mypyc builds can be told apart on a
loaded machine. Each figure is the least CPU time per operation over ``--repeats`` timed loops:
- remoting_json_ns, remoting_msgpack_ns: a SEND_MESSAGE_V2 request's frame (1 KiB body, the SDK's
  eleven header fields) cut by a FrameDecoder, its response built and that response's frame head
  encoded -- a broker's framework cost per send (remoting/frame.py, serializer.py, command.py);
- store_put_ns: a 1 KiB message put into the store and awaited, ASYNC_FLUSH, the index built by
  the store's child process (store/commit_log.py, message_store.py; the child's CPU is not counted).

    .venv/bin/python bench/hot_paths.py [--count 20000] [--repeats 5]

Last line: one JSON object with the keys above and ``compiled`` (rocketmq_py.compiled()).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from store_append import make_message

import rocketmq_py
from rocketmq_py.common.loop import run
from rocketmq_py.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.frame import FrameDecoder, encode_frame, encode_frame_head
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.store.message_store import DefaultMessageStore

SEND_FIELDS = {"a": "bench_pg", "b": "BenchTopic", "c": "TBW102", "d": "8", "e": "3", "f": "0",
               "g": "1700000000000", "h": "0", "i": "TAGS\x01TagA\x02KEYS\x01key-1\x02", "j": "0", "k": "false"}
ANSWER_FIELDS = {"msgId": "7F00000100002A9F0000000000001000", "queueId": "3", "queueOffset": "4096"}


def cpu_ns_per_op(step: Callable[[], object], count: int, repeats: int) -> int:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(count):
            step()
        best = min(best, time.process_time() - t0)
    return round(best / count * 1e9)


def remoting_ns(serialize_type: int, count: int, repeats: int) -> int:
    frame = encode_frame(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(SEND_FIELDS), os.urandom(1024),
                                                 serialize_type=serialize_type))
    decoder = FrameDecoder()

    def step() -> None:
        (request,) = decoder.feed(frame)
        encode_frame_head(request.response(ResponseCode.SUCCESS, None, dict(ANSWER_FIELDS)))

    return cpu_ns_per_op(step, count, repeats)


def store_put_ns(count: int, repeats: int) -> int:
    async def body(root: str) -> int:
        store = DefaultMessageStore(MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=1 << 30))
        await store.load()
        await store.start()
        try:
            messages = [make_message(i) for i in range(count)]
            best = float("inf")
            for _ in range(repeats):
                t0 = time.process_time()
                for msg in messages:
                    await store.put_message(msg)
                best = min(best, time.process_time() - t0)
                await asyncio.sleep(0)
            return round(best / count * 1e9)
        finally:
            await store.shutdown()

    with tempfile.TemporaryDirectory() as root:
        return run(body(root))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    ns = parser.parse_args()
    result = {
        "compiled": rocketmq_py.compiled(),
        "remoting_json_ns": remoting_ns(SerializeType.JSON, ns.count, ns.repeats),
        "remoting_msgpack_ns": remoting_ns(SerializeType.MSGPACK, ns.count, ns.repeats),
        "store_put_ns": store_put_ns(ns.count, ns.repeats),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
