"""mqbench against mqstandalone: bounded runs that print per-second lines and a percentile summary,
while the standalone's metrics endpoint shows the produce TPS and the consumer group's lag."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator

import pytest

from tests.integration.cli import run_cli, run_cli_async
from tests.integration.daemons import Daemon, _spawn
from tests.integration.scrape import metrics_addr, scrape_async


@pytest.fixture
def standalone(tmp_path: str) -> Iterator[tuple[Daemon, str]]:
    home = os.path.join(str(tmp_path), "standalone")
    os.makedirs(home)
    d = _spawn("mqstandalone", ["rocketmq_py.standalone", "--port", "0", "--broker-port", "0", "--home", home,
                                "--metrics-port", "0"], home, "boot success. serializeType=JSON and name server")
    try:
        ns_line = next(ln for ln in d.lines if "The Name Server boot success" in ln)
        yield d, ns_line.rsplit("address ", 1)[1].strip()
    finally:
        assert d.stop() == 0


def _summary(stdout: str) -> dict[str, float]:
    return json.loads(stdout.strip().splitlines()[-1])


async def test_benchmark_produce_and_consume_with_metrics(standalone: tuple[Daemon, str]) -> None:
    daemon, ns = standalone
    metrics = metrics_addr(daemon)
    produce = asyncio.create_task(run_cli_async("mqbench", "produce", "-n", ns, "-t", "BenchTopic", "-d", "20",
                                                "-m", "300", "-r", "100", "-w", "4", "-s", "64", "--json",
                                                timeout=60))
    put_tps: list[float] = []

    async def producing() -> bool:
        # Scraped while the benchmark runs: the topic's messages-in counter moving.
        samples = await scrape_async(metrics)
        put_tps[:] = samples.get("rocketmq_messages_in_total", topic="BenchTopic")
        return bool(put_tps) and put_tps[0] > 0

    deadline = time.monotonic() + 30
    seen = False
    while not seen and not produce.done() and time.monotonic() < deadline:
        seen = await producing()
        await asyncio.sleep(0.2)  # scrape interval (polling a condition, bounded by the deadline)
    result = (await produce).ok()
    assert seen, f"no messages counted in during the run: {put_tps}"
    assert "Send TPS:" in result.stdout and "Average RT(ms):" in result.stdout
    assert "[Complete] Send Total: 300" in result.stdout and "p999(ms):" in result.stdout
    summary = _summary(result.stdout)
    assert summary["messages"] == 300 and summary["failed"] == 0
    assert 0 < summary["p50RtMs"] <= summary["p99RtMs"] <= summary["p999RtMs"] <= summary["maxRtMs"]

    consume = (await run_cli_async("mqbench", "consume", "-n", ns, "-t", "BenchTopic", "-g", "bench_group",
                                   "-m", "100", "-d", "30", "--from-first", "--json", timeout=60)).ok()
    assert "[Complete] Consume Total: 100" in consume.stdout
    assert _summary(consume.stdout)["messages"] == 100
    after = await scrape_async(metrics)
    lag = after.one("rocketmq_consumer_lag_messages", consumer_group="bench_group", topic="BenchTopic")
    assert 0 < lag < 300  # committed part of the topic, not all of it
    assert after.one("rocketmq_messages_out_total", topic="BenchTopic", consumer_group="bench_group") >= 100


def test_benchmark_stops_after_its_duration(standalone: tuple[Daemon, str]) -> None:
    _, ns = standalone
    started = time.monotonic()
    # DemoTopic holds the standalone's 3 demo messages and gets no more: with no --count, only
    # --duration can end this run.
    result = run_cli("mqbench", "consume", "-n", ns, "-t", "DemoTopic", "-g", "idle_group", "-d", "2", timeout=60)
    elapsed = time.monotonic() - started
    assert "[Complete] Consume Total: 3" in result.ok().stdout
    assert result.stdout.count("Consume TPS:") >= 2  # a live line per second, then the summary
    assert 2 <= elapsed < 30


def test_benchmark_bad_input(standalone: tuple[Daemon, str], refused_addr: str) -> None:
    _, ns = standalone
    run_cli("mqbench", "produce", "-n", refused_addr, "-d", "1").failed_with_one_line("mqbench produce:")
    bad = run_cli("mqbench", "produce", "-n", ns, "-s", "0", "-d", "1")
    assert bad.returncode == 2
    bad.failed_with_one_line("-s")
    run_cli("mqbench", "consume", "-n", ns, "-m", "0").failed_with_one_line("--count")
    assert run_cli("mqadmin", "benchmark", "produce", "--help").ok().stdout.count("--duration") == 1
