"""GET_ROUTEINFO_BY_TOPIC queries per second against a real mqnamesrv, beside the streams echo.

A NameServer subprocess gets 1,000 topics registered by 4 brokers (two clusters, every topic on
every broker), then this process asks for routes of random topics at 1 and 64 requests in
flight. In the same run the bare streams echo of ``bench/echo.py`` is measured at 64 in flight.
Rounds are interleaved and medians reported: this machine's speed drifts by up to 2x.

    .venv/bin/python bench/namesrv_route.py [--seconds 3] [--rounds 3]

Last line: one JSON object with route_qps_1, route_qps_64, echo_rps_64, ratio_route_64.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from echo import echo_server, measure_streams_echo

from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.namesrv import RegisterBrokerRequestHeader
from rocketmq_py.remoting.protocol.route import RegisterBrokerBody
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper

TOPICS = [f"BenchTopic-{i:04d}" for i in range(1000)]
BROKERS = [("ClusterA", "broker-a", "127.0.0.11:10911"), ("ClusterA", "broker-b", "127.0.0.12:10911"),
           ("ClusterB", "broker-c", "127.0.0.13:10911"), ("ClusterB", "broker-d", "127.0.0.14:10911")]


def start_namesrv(home: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "rocketmq_py.namesrv.startup", "--home", home, "--listen-port", "0",
                             "--bind-address", "127.0.0.1", "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the boot line, or "" if it died
    if "boot success" not in line:
        proc.kill()
        raise RuntimeError(f"mqnamesrv did not start: {line!r}")
    return proc, line.rsplit("address ", 1)[1].strip()


async def register_all(addr: str) -> None:
    client = RemotingClient()
    table = {t: TopicConfig(topicName=t, readQueueNums=8, writeQueueNums=8) for t in TOPICS}
    body = RegisterBrokerBody(topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
        dataVersion=DataVersion(counter=1), topicConfigTable=table)).encode()
    for cluster, name, baddr in BROKERS:
        header = RegisterBrokerRequestHeader(brokerName=name, brokerAddr=baddr, clusterName=cluster,
                                             haServerAddr=baddr, brokerId=0)
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body), 10)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"registration failed: {resp.remark}")
    await client.close()


async def measure_routes(addr: str, in_flight: int, duration: float) -> float:
    client = RemotingClient()
    await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPICS[0]}), 5)
    rng = random.Random(7)
    done = 0
    deadline = time.perf_counter() + duration

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            topic = TOPICS[rng.randrange(len(TOPICS))]
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                     {"topic": topic}), 10)
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                raise RuntimeError(f"route query failed: {resp.code} {resp.remark}")
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    series: dict[str, list[float]] = {"route_qps_1": [], "route_qps_64": [], "echo_rps_64": []}
    with tempfile.TemporaryDirectory() as home, echo_server() as echo_port:
        proc, addr = start_namesrv(home)
        try:
            run(register_all(addr))
            for rnd in range(ns.rounds):
                figures = {"route_qps_1": run(measure_routes(addr, 1, ns.seconds)),
                           "echo_rps_64": run(measure_streams_echo(echo_port, 64, ns.seconds)),
                           "route_qps_64": run(measure_routes(addr, 64, ns.seconds))}
                for key, value in figures.items():
                    series[key].append(value)
                print(f"round {rnd + 1}: " + "  ".join(f"{k}={v:,.0f}" for k, v in figures.items()), flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
            if proc.stdout:
                proc.stdout.close()
    result: dict[str, float] = {k: round(statistics.median(v)) for k, v in series.items()}
    result["ratio_route_64"] = round(statistics.median(
        a / b for a, b in zip(series["route_qps_64"], series["echo_rps_64"], strict=True)), 3)
    print(f"1,000 topics on 4 brokers; medians of {ns.rounds} rounds of {ns.seconds}s:")
    for key, value in result.items():
        print(f"  {key:16s} {value:>12,}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
