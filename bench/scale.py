"""Scale: the broker's cost grows with the work, not with its bookkeeping (issue 27, goal 3).

Real ``mqbroker`` subprocesses (ASYNC_FLUSH) on 127.0.0.1, the client in this process, every
figure a ratio within one run:

- ``topics_10k``: 1 KiB sends at 64 in flight spread over 10,000 topics of 8 queues each (every
  queue written in turn), over the same sends to one topic. The topics are created first and
  every queue is written once (timed, ``topics_create_s`` and ``topics_first_pass``) before the
  rounds, so the rounds measure the steady state. Beside it, ``topics_shutdown_s``: the seconds
  the broker then takes to exit on SIGTERM.
- ``conns_1k``: the messages per second answered when a bounded total rate is offered from 1,000
  connections (each its own client, the rate spread evenly over them), over the same from 10.
- ``mb_1mib``: MB/s of 1 MiB sends at 8 in flight over the streams echo's MB/s with 1 MiB frames
  (bench/echo.py), one connection each.
- ``cold_read``: MB/s of draining a backlog of at least 4 GiB (one pull in flight per queue, as a
  push consumer does) after restarting the broker and dropping the page cache, over ``dd``
  reading the same CommitLog bytes after dropping the cache again. Needs root (for
  /proc/sys/vm/drop_caches) and the disk room; otherwise skipped with the reason in
  ``cold_read_skipped``. The store is removed afterwards.

    .venv/bin/python bench/scale.py [--quick] [--seconds 3] [--rounds 3] [--only topics,conns,mb,cold]

``--quick`` runs small sizes (500 topics, 100 connections, a 256 MiB backlog, 1.5 s rounds) for a
check that everything works; the default sizes are the issue's. Last line: one JSON object with the
four ratios, the raw figures beside them, and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import BODY, QUEUES, connect, create_topic, drain, running_broker, send_header
from echo import echo_server, measure_streams_echo
from ha_sync import process_cpu

from rocketmq_py.common.daemon import raise_open_file_limit
from rocketmq_py.common.heap import keep_freed_heap
from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

MIB = 1 << 20


@dataclass
class Sizes:
    topics: int = 10_000
    conns: int = 1_000
    conns_base: int = 10
    conns_rate: float = 20_000.0
    backlog: int = 4 << 30
    cold_body: int = 16 * 1024
    seconds: float = 3.0
    rounds: int = 3


QUICK = Sizes(topics=500, conns=100, backlog=256 << 20, seconds=1.5, rounds=2)


async def send_one(client: RemotingClient, addr: str, topic: str, queue_id: int, body: bytes) -> None:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                          send_header(topic, queue_id), body), 30)
    if r.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"send to {topic}/{queue_id} failed: {r.code} {r.remark}")


async def send_spread(client: RemotingClient, addr: str, topics: list[str], in_flight: int, body: bytes,
                      seconds: float | None = None, count: int | None = None) -> float:
    """Messages (or, with ``count``, exactly that many) per second, message i going to topic
    i mod len(topics) and queue (i div len(topics)) mod 8: every queue of every topic in turn."""
    n = len(topics)
    next_i = 0
    done = 0
    deadline = time.perf_counter() + (seconds if seconds is not None else 600)

    async def worker() -> None:
        nonlocal next_i, done
        while time.perf_counter() < deadline and (count is None or next_i < count):
            i = next_i
            next_i += 1
            await send_one(client, addr, topics[i % n], (i // n) % QUEUES, body)
            done += 1

    t0 = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(in_flight))),
                           (seconds if seconds is not None else 600) + 60)
    return done / (time.perf_counter() - t0)


async def create_topics(client: RemotingClient, addr: str, names: list[str], in_flight: int = 32) -> float:
    """Seconds to create ``names`` by UPDATE_AND_CREATE_TOPIC, ``in_flight`` at a time."""
    it = iter(names)

    async def worker() -> None:
        for name in it:
            await create_topic(client, addr, name)

    t0 = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(in_flight))), 1800)
    return time.perf_counter() - t0


def measure_topics(sizes: Sizes, home: str) -> dict[str, float]:
    one = ["SCALE-ONE"]
    many = [f"SCALE-{i:05d}" for i in range(sizes.topics)]
    ones: list[float] = []
    manys: list[float] = []
    out: dict[str, float] = {}
    cpu: dict[int, list[float]] = {1: [], sizes.topics: []}
    loop_cpu: dict[int, list[float]] = {1: [], sizes.topics: []}
    with running_broker(home) as (proc, addr):
        async def setup() -> tuple[float, float]:
            client = await connect(addr)
            try:
                created = await create_topics(client, addr, one + many)
                t0 = time.perf_counter()
                rate = await send_spread(client, addr, many, 64, BODY, count=len(many) * QUEUES)
                print(f"  topics: created {len(many):,} in {created:.1f}s; first pass over {len(many) * QUEUES:,} "
                      f"queues at {rate:,.0f}/s ({time.perf_counter() - t0:.1f}s)", flush=True)
                return created, rate
            finally:
                await client.close()

        out["topics_create_s"], out["topics_first_pass"] = run(setup())

        async def measured(client: RemotingClient, topics: list[str], rates: list[float]) -> None:
            # The broker's CPU per message beside the rate: its whole process (the flush services
            # and the page warmer with the loop) and its event loop alone.
            cpu0, loop0, t0 = process_cpu(proc.pid), process_cpu(proc.pid, proc.pid), time.perf_counter()
            rates.append(await send_spread(client, addr, topics, 64, BODY, sizes.seconds))
            sent = rates[-1] * (time.perf_counter() - t0)
            cpu[len(topics)].append((process_cpu(proc.pid) - cpu0) / sent * 1e6)
            loop_cpu[len(topics)].append((process_cpu(proc.pid, proc.pid) - loop0) / sent * 1e6)

        async def rounds() -> None:
            client = await connect(addr)
            try:
                for rnd in range(sizes.rounds):
                    await measured(client, one, ones)
                    await measured(client, many, manys)
                    print(f"  topics round {rnd + 1}: 1 topic {ones[-1]:,.0f}/s, {len(many):,} topics "
                          f"{manys[-1]:,.0f}/s; the broker's CPU per message {cpu[1][-1]:.1f} and "
                          f"{cpu[len(many)][-1]:.1f} µs, its loop's {loop_cpu[1][-1]:.1f} and "
                          f"{loop_cpu[len(many)][-1]:.1f}", flush=True)
            finally:
                await client.close()

        run(rounds())
        stopping = time.perf_counter()
    # SIGTERM to exit: the shutdown's flush of every queue written (a SIGKILL after 60 s shows as 60).
    out["topics_shutdown_s"] = round(time.perf_counter() - stopping, 1)
    out["send_64_1_topic"] = round(statistics.median(ones))
    out[f"send_64_{sizes.topics}_topics"] = round(statistics.median(manys))
    out["topics_10k"] = round(statistics.median(m / o for m, o in zip(manys, ones, strict=True)), 3)
    for n, name in ((1, "1_topic"), (sizes.topics, f"{sizes.topics}_topics")):
        out[f"broker_cpu_us_{name}"] = round(statistics.median(cpu[n]), 1)
        out[f"loop_cpu_us_{name}"] = round(statistics.median(loop_cpu[n]), 1)
    return out


async def offered_load(clients: list[RemotingClient], addr: str, topic: str, rate: float, seconds: float,
                       cap: int = 64) -> tuple[float, float]:
    """Messages answered per second while ``rate`` per second is offered, one message per tick
    share to each connection in turn (so every connection carries rate / len(clients)); a
    connection with ``cap`` unanswered sends skips its turn (the shortfall counts against it).
    Beside it, the share of a core this process (the clients) used: near 1.0, the clients and
    not the broker set the figure.

    Each send is the client's invoke future with a callback, as an asynchronous send with a
    callback is, not a Task with its coroutines: this process stands in for a thousand
    producers, and at 1,000 connections a Task per send (its context, its name, the weak set of
    all tasks, two coroutine frames, and the collector walking the ones in flight) took its CPU
    per message from 25-28 to 41-45 µs."""
    n = len(clients)
    in_flight = [0] * n
    answered = 0
    failures: list[BaseException] = []
    pending: set[asyncio.Future[RemotingCommand]] = set()

    def answer(c: int, fut: asyncio.Future[RemotingCommand]) -> None:
        nonlocal answered
        pending.discard(fut)
        in_flight[c] -= 1
        if fut.cancelled():
            failures.append(asyncio.CancelledError())
        elif (exc := fut.exception()) is not None:
            failures.append(exc)
        elif (r := fut.result()).code != ResponseCode.SUCCESS:
            failures.append(RuntimeError(f"send to {topic} failed: {r.code} {r.remark}"))
        else:
            answered += 1

    t0, cpu0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds
    cursor = 0
    seq = 0
    credit = 0.0
    last = t0
    while (now := time.perf_counter()) < deadline:
        credit += (now - last) * rate
        last = now
        while credit >= 1:
            credit -= 1
            c = cursor
            cursor = (cursor + 1) % n
            if in_flight[c] < cap:
                fut = asyncio.ensure_future(clients[c].invoke(addr, RemotingCommand.request(
                    RequestCode.SEND_MESSAGE_V2, send_header(topic, seq % QUEUES), BODY), 30))
                in_flight[c] += 1
                pending.add(fut)
                fut.add_done_callback(functools.partial(answer, c))
                seq += 1
        await asyncio.sleep(0.002)
    if pending:
        await asyncio.wait(pending, timeout=60)
        if pending:
            raise TimeoutError(f"{len(pending)} sends unanswered 60 s after the last was offered")
    if failures:
        raise failures[0]
    elapsed = time.perf_counter() - t0
    return answered / elapsed, (time.process_time() - cpu0) / elapsed


def measure_conns(sizes: Sizes, home: str) -> dict[str, float]:
    base: list[float] = []
    wide: list[float] = []
    cpu: dict[int, list[float]] = {sizes.conns_base: [], sizes.conns: []}
    cpu_us: dict[int, list[float]] = {sizes.conns_base: [], sizes.conns: []}
    # The broker's CPU per message answered, its whole process (its busy polling included: near
    # the offered rate it polls between reads rather than sleeping, the clients alike).
    broker_us: dict[int, list[float]] = {sizes.conns_base: [], sizes.conns: []}
    with running_broker(home) as (proc, addr):
        async def go() -> None:
            gate = asyncio.Semaphore(50)

            async def connected() -> RemotingClient:
                async with gate:
                    return await connect(addr)

            admin = await connect(addr)
            await create_topic(admin, addr, "SCALE-CONNS")
            await admin.close()
            small = [await connected() for _ in range(sizes.conns_base)]
            large = await asyncio.wait_for(asyncio.gather(*(connected() for _ in range(sizes.conns))), 300)
            # This process stands in for a process per client, and the clients' objects (about 75
            # each: connection, transport, decoder; 78,000 with 1,010 clients, counted while each
            # still had a housekeeping task of its own, before e2fb04c)
            # would be walked by every full collection it makes, 37 ms of CPU apiece here, where
            # each producer walks only its own; an SDK process freezes its start-up heap for the
            # same reason (common/heap.py). Frozen, a full collection walks what the sends made.
            gc.collect()
            gc.freeze()
            try:
                for rnd in range(sizes.rounds):
                    for clients, series in ((small, base), (large, wide)):
                        b0, t0 = process_cpu(proc.pid), time.perf_counter()
                        rate, share = await offered_load(clients, addr, "SCALE-CONNS", sizes.conns_rate,
                                                         sizes.seconds)
                        answered = rate * (time.perf_counter() - t0)
                        broker_us[len(clients)].append((process_cpu(proc.pid) - b0) / answered * 1e6)
                        series.append(rate)
                        cpu[len(clients)].append(share)
                        cpu_us[len(clients)].append(share / rate * 1e6)
                    print(f"  conns round {rnd + 1}: {sizes.conns_base} connections {base[-1]:,.0f}/s, "
                          f"{sizes.conns:,} connections {wide[-1]:,.0f}/s (offered {sizes.conns_rate:,.0f}/s; "
                          f"clients' CPU {cpu[sizes.conns_base][-1]:.0%} and {cpu[sizes.conns][-1]:.0%} of a core, "
                          f"{cpu_us[sizes.conns_base][-1]:.1f} and {cpu_us[sizes.conns][-1]:.1f} µs a message; "
                          f"the broker's {broker_us[sizes.conns_base][-1]:.1f} and {broker_us[sizes.conns][-1]:.1f})",
                          flush=True)
            finally:
                for client in small + large:
                    await client.close()
                gc.unfreeze()

        run(go())
    return {"conns_offered_rate": sizes.conns_rate, f"conns_{sizes.conns_base}_rate": round(statistics.median(base)),
            f"conns_{sizes.conns}_rate": round(statistics.median(wide)),
            f"conns_{sizes.conns_base}_client_cpu": round(statistics.median(cpu[sizes.conns_base]), 2),
            f"conns_{sizes.conns}_client_cpu": round(statistics.median(cpu[sizes.conns]), 2),
            f"conns_{sizes.conns_base}_client_us": round(statistics.median(cpu_us[sizes.conns_base]), 1),
            f"conns_{sizes.conns}_client_us": round(statistics.median(cpu_us[sizes.conns]), 1),
            f"conns_{sizes.conns_base}_broker_us": round(statistics.median(broker_us[sizes.conns_base]), 1),
            f"conns_{sizes.conns}_broker_us": round(statistics.median(broker_us[sizes.conns]), 1),
            "conns_1k": round(statistics.median(w / b for w, b in zip(wide, base, strict=True)), 3)}


def measure_mb(sizes: Sizes, home: str) -> dict[str, float]:
    body = os.urandom(MIB)
    sends: list[float] = []
    echoes: list[float] = []
    with running_broker(home) as (_, addr), echo_server() as echo_port:
        async def go() -> None:
            client = await connect(addr)
            await create_topic(client, addr, "SCALE-MB")
            try:
                for rnd in range(sizes.rounds):
                    echoes.append(await measure_streams_echo(echo_port, 8, sizes.seconds, MIB) * MIB / 1e6)
                    sends.append(await send_spread(client, addr, ["SCALE-MB"], 8, body, sizes.seconds) * MIB / 1e6)
                    print(f"  1 MiB round {rnd + 1}: sends {sends[-1]:,.0f} MB/s, echo {echoes[-1]:,.0f} MB/s",
                          flush=True)
            finally:
                await client.close()

        run(go())
    return {"send_mb_1mib": round(statistics.median(sends)), "echo_mb_1mib": round(statistics.median(echoes)),
            "mb_1mib": round(statistics.median(s / e for s, e in zip(sends, echoes, strict=True)), 3)}


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cold_read_unavailable(home: str, backlog: int) -> str | None:
    if os.geteuid() != 0:
        return "not root: /proc/sys/vm/drop_caches needs root"
    if not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        return "/proc/sys/vm/drop_caches is not writable (a container without it?)"
    free = shutil.disk_usage(home).free
    need = backlog + backlog // 4 + (1 << 30)
    if free < need:
        return f"{free / 2**30:.1f} GiB free under {home}, {need / 2**30:.1f} GiB needed"
    return None


def resident_file_mb(pid: int) -> float:
    """The broker's file-backed resident memory: what dropping the cache could not evict
    because the broker still has it mapped and touched."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def commit_log_max_offset(client: RemotingClient, addr: str) -> int:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
    return int(json.loads(r.body or b"{}")["table"]["commitLogMaxOffset"])


def dd_read(commit_log_dir: str, total: int) -> float:
    """Seconds for ``dd`` to read the first ``total`` bytes of the CommitLog files in order."""
    t0 = time.perf_counter()
    left = total
    for name in sorted(os.listdir(commit_log_dir)):
        if left <= 0:
            break
        size = os.path.getsize(os.path.join(commit_log_dir, name))
        blocks = -(-min(size, left) // MIB)
        subprocess.run(["dd", f"if={os.path.join(commit_log_dir, name)}", "of=/dev/null", "bs=1M",
                        f"count={blocks}", "status=none"], check=True, timeout=600)
        left -= size
    return time.perf_counter() - t0


def measure_cold(sizes: Sizes, home: str) -> dict[str, float | str]:
    why_not = cold_read_unavailable(home, sizes.backlog)
    if why_not is not None:
        return {"cold_read_skipped": why_not}
    # The client stands in for an SDK consumer, whose MQClientInstance keeps freed heap at its
    # start: it reads 512 KiB answers, which glibc's defaults fault in afresh page by page.
    keep_freed_heap()
    body = os.urandom(sizes.cold_body)
    count = -(-sizes.backlog // sizes.cold_body)
    topic = "SCALE-COLD"
    with running_broker(home) as (_, addr):
        async def write() -> float:
            client = await connect(addr)
            try:
                await create_topic(client, addr, topic)
                t0 = time.perf_counter()
                await send_spread(client, addr, [topic], 16, body, count=count)
                return time.perf_counter() - t0
            finally:
                await client.close()

        wrote_s = run(write())
    print(f"  cold: wrote {count:,} messages of {sizes.cold_body:,} bytes in {wrote_s:.1f}s", flush=True)
    with running_broker(home) as (proc, addr):  # restarted: nothing of the backlog mapped by the writer
        async def read() -> tuple[int, float, float]:
            client = await connect(addr)
            try:
                total = await commit_log_max_offset(client, addr)
                drop_caches()
                resident = resident_file_mb(proc.pid)
                t0 = time.perf_counter()
                await drain(client, addr, topic, count)
                return total, time.perf_counter() - t0, resident
            finally:
                await client.close()

        total, drain_s, resident = run(read())
    drop_caches()
    dd_s = dd_read(os.path.join(home, "commitlog"), total)
    drain_mb = total / drain_s / 1e6
    dd_mb = total / dd_s / 1e6
    print(f"  cold: drained {total / 1e9:.2f} GB in {drain_s:.1f}s ({drain_mb:,.0f} MB/s), dd {dd_s:.1f}s "
          f"({dd_mb:,.0f} MB/s); broker file pages resident after the drop: {resident:,.0f} MB", flush=True)
    return {"cold_backlog_bytes": total, "cold_body": sizes.cold_body, "cold_resident_mb": round(resident),
            "cold_drain_mb": round(drain_mb), "dd_mb": round(dd_mb), "cold_read": round(drain_mb / dd_mb, 3)}


PARTS = {"topics": measure_topics, "conns": measure_conns, "mb": measure_mb, "cold": measure_cold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a check that it all works")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--topics", type=int)
    parser.add_argument("--conns", type=int)
    parser.add_argument("--conns-rate", type=float, help="messages per second offered in the connections part")
    parser.add_argument("--backlog-mib", type=int)
    parser.add_argument("--cold-body", type=int, help="body bytes of the backlog's messages")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    ns = parser.parse_args()
    sizes = QUICK if ns.quick else Sizes()
    for key, value in (("seconds", ns.seconds), ("rounds", ns.rounds), ("topics", ns.topics), ("conns", ns.conns),
                       ("conns_rate", ns.conns_rate), ("cold_body", ns.cold_body),
                       ("backlog", ns.backlog_mib and ns.backlog_mib * MIB)):
        if value:
            setattr(sizes, key, value)
    raise_open_file_limit()  # 1,000 connections need more than a soft limit of 1,024
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    result: dict[str, float | str] = {}
    load_before = os.getloadavg()[0]
    for part in ns.only.split(","):
        print(f"{part}:", flush=True)
        home = tempfile.mkdtemp(prefix=f"scale-{part}-")
        try:
            result.update(PARTS[part](sizes, home))
        finally:  # rm, not shutil.rmtree: 80,000 ConsumeQueue files took Python minutes
            subprocess.run(["rm", "-rf", home], timeout=900, check=False)
    result.update({"open_file_limit": nofile, "load_1m_before": round(load_before, 2),
                   "load_1m_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count() or 0})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
