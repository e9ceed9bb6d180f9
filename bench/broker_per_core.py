"""A broker per core: what a second broker process on the host adds (issue 27, goal 6).

One broker process runs one event loop on one core, so a host's cores are used by running several
(``mqcluster up --brokers-per-host N --cpu-affinity auto``, docs/deployment.md). Two local
clusters are started through ``mqcluster``: one broker pinned to the first CPU, and two brokers
pinned to the first and second. The client, this process, is pinned to ``--client-cpu`` (the
last CPU by default) and sends 1 KiB messages at 64 in flight over a topic of 8 queues on every
broker of the cluster, round robin over all its queues as a producer does. Rounds alternate
between the clusters; the ratio is taken within each round.

On a 2-core machine the second broker shares its core with the client: the figure says what a
second process adds there, not what it adds on a host with a core to spare for it.

    .venv/bin/python bench/broker_per_core.py [--seconds 3] [--rounds 3] [--client-cpu N]

Last line: one JSON object with send_64_1_broker, send_64_2_brokers, brokers_2_over_1, the CPU
share of its core the client used in each, the CPUs used and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import BODY, QUEUES, connect, create_topic, send_header

from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

TOPIC = "PER-CORE"


def mqcluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rocketmq_py.tools.mqcluster", *args], capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)


def cluster_up(home: str, brokers: int, cpus: list[int]) -> list[str]:
    """The broker addresses of a cluster started by ``mqcluster up``, each broker pinned."""
    out = mqcluster("up", "--home", home, "--free-ports", "--brokers-per-host", str(brokers),
                    "--cpu-affinity", ",".join(map(str, cpus)), "--json")
    if out.returncode != 0:
        raise RuntimeError(f"mqcluster up failed: {out.stderr.strip()}")
    services = json.loads(out.stdout)["services"]
    return [svc["addr"] for name, svc in sorted(services.items()) if name != "namesrv"]


async def measure(addrs: list[str], in_flight: int, seconds: float) -> tuple[float, float]:
    """Sends per second and the client's CPU share of its core over ``seconds``."""
    clients: list[RemotingClient] = [await connect(addr) for addr in addrs]
    for c, addr in zip(clients, addrs, strict=True):
        await create_topic(c, addr, TOPIC)
    targets = [(clients[b], addrs[b], q) for q in range(QUEUES) for b in range(len(addrs))]
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < deadline:
            c, addr, q = targets[i % len(targets)]
            r = await c.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_header(TOPIC, q),
                                                             BODY), 10)
            if r.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")
            done += 1
            i += in_flight

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker(w) for w in range(in_flight))), seconds + 60)
    elapsed = time.perf_counter() - t0
    share = (time.process_time() - cpu0) / elapsed
    for c in clients:
        await c.close()
    return done / elapsed, share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client-cpu", type=int, help="the client's CPU (default: the last one allowed)")
    ns = parser.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        sys.exit(f"needs 2 CPUs, this process may use {allowed}")
    client_cpu = allowed[-1] if ns.client_cpu is None else ns.client_cpu
    broker_cpus = allowed[:2]
    one: list[float] = []
    two: list[float] = []
    shares: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="per-core-") as home:
        homes = {1: os.path.join(home, "one"), 2: os.path.join(home, "two")}
        try:
            addrs = {1: cluster_up(homes[1], 1, broker_cpus[:1]), 2: cluster_up(homes[2], 2, broker_cpus)}
            os.sched_setaffinity(0, {client_cpu})  # after the clusters: their daemons are not the client's
            for rnd in range(ns.rounds):
                for n, series in ((1, one), (2, two)):
                    rate, share = run(measure(addrs[n], 64, ns.seconds))
                    series.append(rate)
                    shares[n].append(share)
                print(f"round {rnd + 1}: 1 broker {one[-1]:,.0f}/s (client {shares[1][-1]:.0%} of its core), "
                      f"2 brokers {two[-1]:,.0f}/s (client {shares[2][-1]:.0%})", flush=True)
        finally:
            for h in homes.values():
                mqcluster("down", "--home", h)
    result = {"send_64_1_broker": round(statistics.median(one)), "send_64_2_brokers": round(statistics.median(two)),
              "brokers_2_over_1": round(statistics.median(b / a for a, b in zip(one, two, strict=True)), 3),
              "client_core_share_1": round(statistics.median(shares[1]), 2),
              "client_core_share_2": round(statistics.median(shares[2]), 2),
              "client_cpu": client_cpu, "broker_cpus": broker_cpus, "cpus": os.cpu_count() or 0,
              "load_1m": round(os.getloadavg()[0], 2)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
