"""Broker send and pull throughput over the remoting layer, beside the streams echo, in one run.

A real ``mqbroker`` subprocess (ASYNC_FLUSH) and one client process: 1 KiB SEND_MESSAGE_V2 sends
at 1 and 64 in flight, SEND_BATCH_MESSAGE with 32 per batch at 16 batches in flight (as Apache
RocketMQ's BatchProducer benchmark runs its 16 sender threads) and at one, and pulls draining a
200,000-message backlog spread over 8 queues, 32 messages per pull, one pull in flight per queue (as
a push consumer does). The streams echo of ``bench/echo.py`` is measured in the same run. Each client
first sends a HEART_BEAT and, as the SDK does, writes msgpack headers when the broker offers them.

    .venv/bin/python bench/broker_send.py [--seconds 3] [--rounds 3] [--backlog 200000]

The batches' entries share one properties string (TAGS); send_batch_msgs_uniq sends batches whose
entries each carry their own UNIQ_KEY as well, as the SDK's and Java's producers send them (each
entry's properties then differ, and the index child indexes every key).

Last line: one JSON object with send_1, send_64, send_batch_msgs (16 in flight),
send_batch_msgs_1 (one in flight), send_batch_msgs_uniq (16 in flight), pull_msgs, echo_rps_64,
ratio_send_64, ratio_batch, ratio_batch_1, ratio_batch_uniq, ratio_pull (each figure /
echo_rps_64).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from echo import echo_server, measure_streams_echo, stop_process

from rocketmq_py.acl.acl_client_rpc_hook import AclClientRPCHook
from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.message_id import create_uniq_id
from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.client import ClientConfig
from rocketmq_py.remoting.codes import SerializeType, offers_serialize_type
from rocketmq_py.remoting.protocol.broker import (
    FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketmq_py.remoting.protocol.heartbeat import HeartbeatData
from rocketmq_py.remoting.protocol.message import BatchEntry, encode_batch

BODY = os.urandom(1024)
QUEUES = 8


def start_broker(home: str, options: list[str] | None = None) -> tuple[subprocess.Popen[str], str]:
    extra = [arg for opt in options or [] for arg in ("-o", opt)]
    proc = subprocess.Popen([sys.executable, "-m", "rocketmq_py.broker.startup", "--listen-port", "0", "--store", home,
                             "-o", "brokerIP1=127.0.0.1", "-o", "bindAddress=127.0.0.1", "-o", "brokerName=bench",
                             "-o", "mappedFileSizeCommitLog=1073741824", "--log-level", "WARNING", *extra],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "NAMESRV_ADDR": ""})
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the boot line, or "" if it died
    if "boot success" not in line:
        proc.kill()
        raise RuntimeError(f"mqbroker did not start: {line!r}")
    return proc, line.split("[", 1)[1].split("]", 1)[0].split(", ", 1)[1]


@contextlib.contextmanager
def running_broker(home: str, options: list[str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A broker until the block ends; its console drained in a thread (a full pipe would stall
    it), the last lines kept for the error when it dies."""
    proc, addr = start_broker(home, options)
    tail: collections.deque[str] = collections.deque(maxlen=20)

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield proc, addr
    except BaseException:
        if proc.poll() is not None:
            print(f"broker exited with {proc.returncode}; its last lines:", *tail, sep="\n  ", file=sys.stderr)
        raise
    finally:
        stop_process(proc, 60)
        reader.join(10)


_BASE: dict[tuple[str, bool], dict[str, str]] = {}


def send_header(topic: str, queue_id: int, batch: bool = False) -> dict[str, str]:
    """The V2 header's extFields, built once per topic and copied per send, as a client would.
    A batch's header carries only WAIT, as the SDK's and Java's do: the tags are its entries'."""
    base = _BASE.get((topic, batch))
    if base is None:
        base = _BASE[(topic, batch)] = SendMessageRequestHeaderV2.from_v1(SendMessageRequestHeader(
            producerGroup="bench_pg", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=QUEUES, queueId=0,
            sysFlag=0, bornTimestamp=0, flag=0,
            properties="WAIT\x01true" if batch else "WAIT\x01true\x02TAGS\x01bench",
            batch=batch or None)).to_ext_fields()
    ext = dict(base)
    ext["e"] = str(queue_id)
    ext["g"] = str(int(time.time() * 1000))
    return ext


async def connect(addr: str, ssl_context: ssl.SSLContext | None = None,
                  credentials: SessionCredentials | None = None) -> RemotingClient:
    """A client that has greeted the broker as the SDK's instance does, taking its header offer
    (over TLS with ``ssl_context``: bench/tls_send.py; signing with ``credentials``:
    bench/acl_send.py)."""
    hooks = [AclClientRPCHook(credentials)] if credentials is not None else []
    client = RemotingClient(ClientConfig(ssl_context=ssl_context), rpc_hooks=hooks)
    r = await client.invoke(addr, RemotingCommand.request(
        RequestCode.HEART_BEAT, None, HeartbeatData(clientID="bench@1").encode()), 10)
    if offers_serialize_type(r.ext_fields, SerializeType.MSGPACK):
        client.set_request_serialize_type(addr, SerializeType.MSGPACK)
    return client


async def create_topic(client: RemotingClient, addr: str, topic: str) -> None:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
        "perm": "6", "topicFilterType": "SINGLE_TAG"}), 10)
    if r.code != ResponseCode.SUCCESS:
        raise RuntimeError(r.remark)


async def measure_send(addr: str, topic: str, in_flight: int, seconds: float,
                       ssl_context: ssl.SSLContext | None = None, credentials: SessionCredentials | None = None
                       ) -> float:
    client = await connect(addr, ssl_context, credentials)
    await create_topic(client, addr, topic)
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                                  send_header(topic, (done + w) % QUEUES), BODY), 10)
            if r.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(in_flight)))
    rate = done / (time.perf_counter() - t0)
    await client.close()
    return rate


BATCH_BODY = encode_batch([BatchEntry(0, BODY, "TAGS\x01bench") for _ in range(32)])
# Bodies whose entries each hold a UNIQ_KEY of their own, sent in turn: the keys of a body come
# round again only after 256 batches, which the broker cannot tell from new ones.
UNIQ_BATCH_BODIES = [encode_batch([BatchEntry(0, BODY, f"TAGS\x01bench\x02UNIQ_KEY\x01{create_uniq_id()}")
                                   for _ in range(32)]) for _ in range(256)]
# Batches in flight at once: the 16 sender threads of RocketMQ's BatchProducer benchmark, each
# with one batch out (issue 27 compares the Java broker under it). One in flight measures a
# batch's round trip instead, the client's own work on it included.
BATCHES_IN_FLIGHT = 16


async def send_batches(client: RemotingClient, addr: str, topic: str, count: int | None, seconds: float | None,
                       bodies: list[bytes] | None = None) -> tuple[int, float]:
    bodies = bodies or [BATCH_BODY]
    sent = 0
    t0 = time.perf_counter()
    deadline = t0 + (seconds if seconds is not None else 3600)
    while time.perf_counter() < deadline and (count is None or sent < count):
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE,
                                                              send_header(topic, (sent // 32) % QUEUES, True),
                                                              bodies[(sent // 32) % len(bodies)]), 10)
        if r.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"batch failed: {r.code} {r.remark}")
        sent += 32
    return sent, time.perf_counter() - t0


async def measure_batch(addr: str, topic: str, seconds: float, in_flight: int = BATCHES_IN_FLIGHT,
                        bodies: list[bytes] | None = None) -> float:
    """Messages per second sent in batches of 32 by ``in_flight`` senders on one connection."""
    client = await connect(addr)
    await create_topic(client, addr, topic)
    t0 = time.perf_counter()
    done = await asyncio.gather(*(send_batches(client, addr, topic, None, seconds, bodies) for _ in range(in_flight)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return sum(sent for sent, _ in done) / elapsed


async def drain(client: RemotingClient, addr: str, topic: str, expected: int) -> int:
    """Messages pulled from every queue of ``topic`` from offset 0 to its end, one pull in flight
    per queue, 32 messages per pull."""
    received = 0

    async def queue(qid: int) -> None:
        nonlocal received
        offset = 0
        while True:
            header = PullMessageRequestHeader(consumerGroup="bench_cg", topic=topic, queueId=qid, queueOffset=offset,
                                              maxMsgNums=32, sysFlag=FLAG_SUBSCRIPTION, commitOffset=0,
                                              suspendTimeoutMillis=0, subVersion=0, subscription="*")
            r = await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header), 30)
            if r.code != ResponseCode.SUCCESS:
                return
            next_offset = int((r.ext_fields or {})["nextBeginOffset"])
            received += next_offset - offset
            offset = next_offset

    await asyncio.wait_for(asyncio.gather(*(queue(q) for q in range(QUEUES))), 1800)
    if received < expected:
        raise RuntimeError(f"drained {received} of {expected}")
    return received


async def measure_pull(addr: str, topic: str, backlog: int) -> float:
    client = await connect(addr)
    await create_topic(client, addr, topic)
    await asyncio.gather(*(send_batches(client, addr, topic, backlog // 4, None) for _ in range(4)))
    t0 = time.perf_counter()
    received = await drain(client, addr, topic, backlog)
    rate = received / (time.perf_counter() - t0)
    await client.close()
    return rate


class SendTarget(NamedTuple):
    """A broker to send to, over TLS with ``ssl_context``, signed with ``credentials``."""

    addr: str
    ssl_context: ssl.SSLContext | None = None
    credentials: SessionCredentials | None = None


def compare_send_64(kind: str, plain: SendTarget, other: SendTarget, seconds: float, rounds: int
                    ) -> dict[str, float]:
    """send_64 to ``plain`` and to ``other`` round by round, alternating which goes first so that
    neither always meets the warmer machine: the medians, send_64_plain and send_64_<kind>, and
    ratio_<kind>, the median of the rounds' own ratios (bench/acl_send.py, bench/tls_send.py)."""
    series: dict[str, list[float]] = {"plain": [], kind: []}
    for rnd in range(rounds):
        order = [("plain", plain), (kind, other)]
        if rnd % 2:
            order.reverse()
        for name, target in order:
            series[name].append(run(measure_send(target.addr, f"{kind.upper()}64-{name}-{rnd}", 64, seconds,
                                                 target.ssl_context, target.credentials)))
        print(f"round {rnd + 1}: send_64_plain={series['plain'][-1]:,.0f}  "
              f"send_64_{kind}={series[kind][-1]:,.0f}", flush=True)
    return {"send_64_plain": round(statistics.median(series["plain"])),
            f"send_64_{kind}": round(statistics.median(series[kind])),
            f"ratio_{kind}": round(statistics.median(o / p for o, p in zip(series[kind], series["plain"],
                                                                           strict=True)), 3)}


def round_parser(doc: str) -> argparse.ArgumentParser:
    """The options every broker send bench takes: --seconds per measurement and --rounds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    return parser


def main() -> None:
    parser = round_parser(__doc__)
    parser.add_argument("--backlog", type=int, default=200_000)
    parser.add_argument("-o", "--broker-option", action="append", default=[],
                        help="key=value passed to mqbroker as -o (repeatable)")
    ns = parser.parse_args()
    series: dict[str, list[float]] = {k: [] for k in ("send_1", "send_64", "send_batch_msgs", "send_batch_msgs_1",
                                                      "send_batch_msgs_uniq", "pull_msgs", "echo_rps_64")}
    with tempfile.TemporaryDirectory() as home, echo_server() as echo_port, \
            running_broker(home, ns.broker_option) as (_, addr):
        for rnd in range(ns.rounds):
            figures = {
                "echo_rps_64": run(measure_streams_echo(echo_port, 64, ns.seconds)),
                "send_1": run(measure_send(addr, f"S1-{rnd}", 1, ns.seconds)),
                "send_64": run(measure_send(addr, f"S64-{rnd}", 64, ns.seconds)),
                "send_batch_msgs": run(measure_batch(addr, f"B-{rnd}", ns.seconds)),
                "send_batch_msgs_1": run(measure_batch(addr, f"B1-{rnd}", ns.seconds, 1)),
                "send_batch_msgs_uniq": run(measure_batch(addr, f"BU-{rnd}", ns.seconds, bodies=UNIQ_BATCH_BODIES)),
                "pull_msgs": run(measure_pull(addr, f"P-{rnd}", ns.backlog)),
            }
            for key, value in figures.items():
                series[key].append(value)
            print(f"round {rnd + 1}: " + "  ".join(f"{k}={v:,.0f}" for k, v in figures.items()), flush=True)
    result: dict[str, float] = {k: round(statistics.median(v)) for k, v in series.items()}
    for key, name in (("ratio_send_64", "send_64"), ("ratio_batch", "send_batch_msgs"),
                      ("ratio_batch_1", "send_batch_msgs_1"), ("ratio_batch_uniq", "send_batch_msgs_uniq"),
                      ("ratio_pull", "pull_msgs")):
        result[key] = round(statistics.median(a / b for a, b in zip(series[name], series["echo_rps_64"],
                                                                     strict=True)), 3)
    print(f"medians of {ns.rounds} rounds, 1 KiB messages, broker in its own process:")
    for key, value in result.items():
        print(f"  {key:16s} {value:>12,}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
