"""``mqbench produce|consume`` (also ``mqadmin benchmark ...``): RocketMQ's benchmark Producer and
Consumer. Every second a line with TPS, average and max RT; at the end a summary with p50, p99 and
p999 (and ``--json``: the summary as one JSON line, last). With ``--count`` a progress bar shows
how far along the run is. Runs until ``--duration`` seconds pass, ``--count`` messages are done,
or Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.message import Message
from rocketmq_py.client.producer import Producer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.tools.bench_stats import LatencyRecorder, Window
from rocketmq_py.tools.cli import NamesrvOption, hinted, main_entry

app = typer.Typer(name="mqbench", add_completion=False, no_args_is_help=True, help=__doc__)


class _Run:
    """Stop conditions and the once-a-second report shared by both sides."""

    def __init__(self, duration: float, count: int | None, label: str, console: Console, rate: float = 0) -> None:
        self.duration = duration
        self.rate = rate
        self.count = count
        self.claimed = 0
        self.done = 0
        self.label = label
        self.console = console
        self.stop = asyncio.Event()
        self.started = time.monotonic()

    def claim(self, n: int) -> int:
        """Reserve up to ``n`` of the messages still to do (0: the run is over), so concurrent
        workers never overshoot ``--count``."""
        if self.stop.is_set():
            return 0
        if self.count is not None:
            n = max(min(n, self.count - self.claimed), 0)
        self.claimed += n
        return n

    async def pace(self, index: int) -> None:
        """With ``--rate``, hold message number ``index`` until its slot (start + index / rate)."""
        if self.rate > 0:
            delay = self.started + index / self.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)

    def release(self, n: int) -> None:
        """Give back a reservation whose send failed: those messages are still to do."""
        self.claimed -= n

    def add(self, n: int) -> None:
        self.done += n
        if self.count is not None and self.done >= self.count:
            self.stop.set()

    async def report(self, recorder: LatencyRecorder, progress: Progress | None, task: TaskID | None,
                     extra: Callable[[Window], str] | None = None) -> None:
        last = time.monotonic()
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), max(0.0, last + 1.0 - time.monotonic()))
            now = time.monotonic()
            w = recorder.roll()
            span = max(now - last, 1e-3)
            last = now
            line = (f"{self.label} TPS: {w.count / span:.0f} Max RT(ms): {w.max_ms:.3f} Average RT(ms): "
                    f"{w.avg_ms:.3f} Failed: {w.failed}" + (extra(w) if extra else ""))
            self.console.print(line, highlight=False)
            if progress is not None and task is not None:
                progress.update(task, completed=self.done)
            if self.duration > 0 and now - self.started >= self.duration:
                self.stop.set()


def _progress(console: Console, count: int | None, label: str) -> tuple[Progress | None, TaskID | None]:
    if count is None:
        return None, None
    progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                        transient=False)
    return progress, progress.add_task(label, total=count)


def _finish(label: str, run: _Run, recorder: LatencyRecorder, as_json: bool, console: Console) -> None:
    summary = recorder.summary(run.done, time.monotonic() - run.started)
    console.print(f"[Complete] {label} Total: {summary['messages']} {label} TPS: {summary['tps']} "
                  f"Max RT(ms): {summary['maxRtMs']} Average RT(ms): {summary['avgRtMs']} "
                  f"p50(ms): {summary['p50RtMs']} p99(ms): {summary['p99RtMs']} p999(ms): {summary['p999RtMs']} "
                  f"Failed: {summary['failed']}", highlight=False)
    if as_json:
        print(json.dumps({"side": label.lower(), **summary}), flush=True)


def _install_stop(run: _Run) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, run.stop.set)


async def _produce(namesrv: str | None, topic: str, size: int, in_flight: int, duration: float, count: int | None,
                   batch: int, keys: bool, rate: float, as_json: bool, access: Access) -> int:
    console = Console(width=None if os.isatty(1) else 200)
    run = _Run(duration, count, "Send", console, rate)
    recorder = LatencyRecorder()
    body = b"x" * size
    progress, task = _progress(console, count, "produce")
    seq = 0

    def message() -> Message:
        nonlocal seq
        seq += 1
        return Message(topic, body, keys=f"bench-{os.getpid()}-{seq}" if keys else None)

    async def worker(producer: Producer) -> None:
        while True:
            index = run.claimed
            n = run.claim(batch)
            if n <= 0:
                break
            await run.pace(index)
            msgs = [message() for _ in range(n)]
            started = time.perf_counter()
            try:
                if batch > 1:
                    await producer.send_batch(msgs)
                else:
                    await producer.send(msgs[0])
            except MQClientError:
                recorder.record_failure(n)
                run.release(n)
                await asyncio.sleep(0.01)  # back off a failing broker instead of spinning on it
                continue
            recorder.record((time.perf_counter() - started) * 1000, n)
            run.add(n)

    async with Producer("benchmark_producer", namesrv, instance_name=f"bench-{os.getpid()}",
                        session_credentials=access.credentials, use_tls=access.tls) as producer:
        # One send first, so a dead NameServer or an unroutable topic fails fast with its reason.
        if run.claim(1):
            await producer.send(message())
            run.add(1)
        _install_stop(run)
        with progress or contextlib.nullcontext():
            reporter = asyncio.create_task(run.report(recorder, progress, task))
            await asyncio.gather(*(worker(producer) for _ in range(in_flight)))
            run.stop.set()
            await reporter
    _finish("Send", run, recorder, as_json, console)
    return 0


async def _consume(namesrv: str | None, topic: str, group: str, duration: float, count: int | None,
                   from_first: bool, as_json: bool, access: Access) -> int:
    console = Console(width=None if os.isatty(1) else 200)
    run = _Run(duration, count, "Consume", console)
    recorder = LatencyRecorder()  # born-to-consume RT (B2C)
    store_rt = LatencyRecorder()  # store-to-consume RT (S2C)
    progress, task = _progress(console, count, "consume")
    consumer = LitePullConsumer(group, namesrv, instance_name=f"bench-{os.getpid()}", pull_batch_size=32,
                                session_credentials=access.credentials, use_tls=access.tls,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET if from_first
                                else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    consumer.subscribe(topic)

    def s2c(_: Window) -> str:
        w = store_rt.roll()
        return f" Average(S2C) RT(ms): {w.avg_ms:.3f} Max(S2C) RT(ms): {w.max_ms:.3f}"

    async with consumer:
        _install_stop(run)
        with progress or contextlib.nullcontext():
            reporter = asyncio.create_task(run.report(recorder, progress, task, s2c))
            while not run.stop.is_set():
                poll = asyncio.create_task(consumer.poll(0.5))
                stopped = asyncio.create_task(run.stop.wait())
                await asyncio.wait({poll, stopped}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if not poll.done():
                    poll.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await poll
                    break
                msgs = poll.result()
                now_ms = time.time() * 1000
                take = msgs[: run.claim(len(msgs))]
                for m in take:
                    recorder.record(max(now_ms - m.born_timestamp, 0.0))
                    store_rt.record(max(now_ms - m.store_timestamp, 0.0))
                run.add(len(take))
            run.stop.set()
            await reporter
    _finish("Consume", run, recorder, as_json, console)
    return 0


def _run(job: Callable[[], Coroutine[Any, Any, object]], side: str) -> None:
    try:
        asyncio.run(job())
    except (MQClientError, OSError, TimeoutError, ValueError) as exc:
        typer.echo(f"mqbench {side}: {hinted(exc)}", err=True)
        raise typer.Exit(1) from None


@dataclass(frozen=True)
class Access:
    """How the benchmark's clients reach the cluster: an ACL account, TLS."""

    credentials: SessionCredentials | None = None
    tls: bool = False


def _access(access_key: str | None, secret_key: str | None, tls: bool) -> Access:
    if bool(access_key) != bool(secret_key):
        typer.echo("mqbench: --ak and --sk go together: pass both (an ACL account) or neither", err=True)
        raise typer.Exit(2)
    return Access(SessionCredentials(access_key, secret_key) if access_key and secret_key else None, tls)


AccessKeyOption = typer.Option(None, "--ak", help="ACL accessKey to sign requests with")
SecretKeyOption = typer.Option(None, "--sk", help="ACL secretKey of --ak")
TlsOption = typer.Option(False, "--tls", help="TLS to the NameServers and brokers")


def _check(duration: float, count: int | None) -> None:
    if duration < 0 or (count is not None and count <= 0):
        typer.echo("mqbench: --duration must be >= 0 and --count positive", err=True)
        raise typer.Exit(2)


@app.command("produce", help="Benchmark producer: TPS and send RT")
def produce(
    topic: str = typer.Option("BenchmarkTest", "-t", "--topic", help="Topic to send to"),
    size: int = typer.Option(128, "-s", "--messageSize", help="Message body size in bytes"),
    in_flight: int = typer.Option(16, "-w", "--threadCount", help="Sends in flight at once"),
    duration: float = typer.Option(0, "-d", "--duration", help="Seconds to run (0: until --count or Ctrl-C)"),
    count: int | None = typer.Option(None, "-m", "--count", help="Messages to send, with a progress bar"),
    batch: int = typer.Option(1, "-b", "--batchSize", help="Messages per send (>1: batch sends)"),
    keys: bool = typer.Option(False, "-k", "--keyEnable", help="Give every message a key (indexed)"),
    rate: float = typer.Option(0, "-r", "--rate", help="At most this many messages per second (0: no limit)"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = typer.Option(False, "--json", help="Also print the summary as one JSON line"),
    access_key: str | None = AccessKeyOption,
    secret_key: str | None = SecretKeyOption,
    tls: bool = TlsOption,
) -> None:
    _check(duration, count)
    access = _access(access_key, secret_key, tls)
    if size <= 0 or in_flight <= 0 or batch <= 0 or rate < 0:
        typer.echo("mqbench produce: -s, -w and -b must be positive, -r not negative", err=True)
        raise typer.Exit(2)
    _run(lambda: _produce(namesrv, topic, size, in_flight, duration, count, batch, keys, rate, as_json, access),
         "produce")


@app.command("consume", help="Benchmark consumer: TPS and born/store-to-consume RT")
def consume(
    topic: str = typer.Option("BenchmarkTest", "-t", "--topic", help="Topic to consume"),
    group: str = typer.Option("benchmark_consumer", "-g", "--group", help="Consumer group"),
    duration: float = typer.Option(0, "-d", "--duration", help="Seconds to run (0: until --count or Ctrl-C)"),
    count: int | None = typer.Option(None, "-m", "--count", help="Messages to consume, with a progress bar"),
    from_first: bool = typer.Option(False, "--from-first", help="A new group starts at the first offset"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = typer.Option(False, "--json", help="Also print the summary as one JSON line"),
    access_key: str | None = AccessKeyOption,
    secret_key: str | None = SecretKeyOption,
    tls: bool = TlsOption,
) -> None:
    _check(duration, count)
    access = _access(access_key, secret_key, tls)
    _run(lambda: _consume(namesrv, topic, group, duration, count, from_first, as_json, access), "consume")


def main() -> None:
    main_entry(app, "mqbench")


if __name__ == "__main__":
    main()
