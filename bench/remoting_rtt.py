"""Remoting request/response throughput against the bare streams echo, measured in one run.

A ``RemotingServer`` runs in its own process with one processor that answers every request with
its 1 KiB body; this process drives it with a ``RemotingClient`` at 1 and 64 requests in flight
(64 tasks each awaiting ``invoke``), with JSON and with msgpack headers. In the same run the
streams echo of ``bench/echo.py`` does the same round trips. Rounds are interleaved and the
medians reported, because this machine's speed drifts by up to 2x over minutes.

    .venv/bin/python bench/remoting_rtt.py [--seconds 3] [--rounds 3]

Last line: one JSON object with rps_json_1, rps_json_64, rps_msgpack_64, echo_rps_1,
echo_rps_64, ratio_json_64 and ratio_msgpack_64.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from echo import echo_server, free_port, measure_streams_echo, subprocess_server

from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RemotingServer, SerializeType, ServerConfig

BENCH_CODE = 1000
BODY = os.urandom(1024)
HEADER = {"topic": "BenchTopic", "queueId": "3", "producerGroup": "bench_group"}


async def _serve(port: int, max_life: float) -> None:
    server = RemotingServer(ServerConfig(host="127.0.0.1", port=port))

    async def echo(conn, request):  # type: ignore[no-untyped-def]
        return request.response(body=request.body)

    server.register_processor(BENCH_CODE, echo, max_concurrency=100_000)
    await server.start()
    await asyncio.sleep(max_life)  # a safety net: the driver stops us by PID


async def measure_remoting(port: int, in_flight: int, duration: float, stype: int) -> float:
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"
    await client.invoke(addr, RemotingCommand.request(BENCH_CODE, HEADER, BODY, serialize_type=stype), 5)
    done = 0
    deadline = time.perf_counter() + duration

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            request = RemotingCommand.request(BENCH_CODE, dict(HEADER), BODY, serialize_type=stype)
            response = await client.invoke(addr, request, 10)
            if response.body != BODY:
                raise RuntimeError("echo body mismatch")
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median reported)")
    ns = parser.parse_args()

    series: dict[str, list[float]] = {k: [] for k in
                                      ("rps_json_1", "rps_json_64", "rps_msgpack_64", "echo_rps_1", "echo_rps_64")}
    port = free_port()
    with echo_server() as echo_port, subprocess_server([os.path.abspath(__file__), "serve", "--port", str(port)], port):
        for rnd in range(ns.rounds):
            figures = {
                "echo_rps_1": run(measure_streams_echo(echo_port, 1, ns.seconds)),
                "rps_json_1": run(measure_remoting(port, 1, ns.seconds, SerializeType.JSON)),
                "echo_rps_64": run(measure_streams_echo(echo_port, 64, ns.seconds)),
                "rps_json_64": run(measure_remoting(port, 64, ns.seconds, SerializeType.JSON)),
                "rps_msgpack_64": run(measure_remoting(port, 64, ns.seconds, SerializeType.MSGPACK)),
            }
            for key, value in figures.items():
                series[key].append(value)
            print(f"round {rnd + 1}: " + "  ".join(f"{k}={v:,.0f}" for k, v in figures.items()), flush=True)

    result: dict[str, float] = {k: round(statistics.median(v)) for k, v in series.items()}
    # Ratios per round, then the median: both sides of a ratio come from the same minute.
    result["ratio_json_64"] = round(statistics.median(
        a / b for a, b in zip(series["rps_json_64"], series["echo_rps_64"], strict=True)), 3)
    result["ratio_msgpack_64"] = round(statistics.median(
        a / b for a, b in zip(series["rps_msgpack_64"], series["echo_rps_64"], strict=True)), 3)
    print(f"medians of {ns.rounds} rounds, {ns.seconds}s each, 1 KiB bodies, separate processes:")
    for key, value in result.items():
        print(f"  {key:18s} {value:>12,}")
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        p = argparse.ArgumentParser()
        p.add_argument("mode")
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--max-life", type=float, default=1800.0)
        a = p.parse_args()
        run(_serve(a.port, a.max_life))
    else:
        main()
