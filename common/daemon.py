"""What every daemon's CLI shares: ``-o key=value`` overrides, the boot line, and running until
SIGINT/SIGTERM with a graceful shutdown (as uvicorn's server does), its exporter started after
the daemon and closed before it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Protocol

from rocketmq_py.common.heap import freeze_startup_heap, keep_freed_heap
from rocketmq_py.common.metrics import DaemonMetrics
from rocketmq_py.common.properties import ConfigError

log = logging.getLogger("rocketmq")


class Controller(Protocol):
    """A daemon's wiring and lifecycle (Java's NamesrvController, BrokerController)."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


def parse_overrides(options: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"option {option!r} is not key=value")
        props[key.strip()] = value.strip()
    return props


def raise_open_file_limit() -> None:
    """The soft open-file limit raised to the hard one, both logged.

    Every client connection and every mapped store file holds a descriptor (a mapping does before
    Python 3.13), and a soft limit of 1,024 is a common default that a busy broker outgrows; the
    hard limit is what the administrator allows. Java's launch scripts leave this to ``ulimit``;
    a daemon that raises it itself cannot be started short of it by accident."""
    try:
        import resource  # POSIX only: Windows has no such limit
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = soft
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            raised = hard
        except (ValueError, OSError) as exc:  # macOS refuses an unlimited soft limit
            log.warning("cannot raise the open-file limit from %s to %s: %s", soft, hard, exc)
    log.info("open-file limit (RLIMIT_NOFILE): soft %s, hard %s (soft was %s at start)", _limit(raised),
             _limit(hard), _limit(soft))


def _limit(value: int) -> str:
    try:
        import resource
    except ImportError:
        return str(value)
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def start_default_executor(loop: asyncio.AbstractEventLoop) -> int:
    """The loop's default executor (``to_thread``: flushes, config writes) with all its threads
    started now; returns how many.

    A ThreadPoolExecutor starts a thread when a task finds none idle, and ``Thread.start`` blocks
    until the new thread has run: the first time two flushes overlapped, the broker's loop stood
    still for milliseconds, and every message in flight with it (docs/latency.md). Started before
    serving, the threads cost that once, at boot."""
    workers = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's own default
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="asyncio")
    # Each task holds its thread until all have one, so every submit finds none idle and starts one.
    barrier = threading.Barrier(workers, timeout=10.0)
    started = 0
    try:
        for _ in range(workers):
            executor.submit(barrier.wait)
            started += 1
    except RuntimeError as exc:  # no thread could be made (a process limit): the rest start on demand
        log.warning("started %d of %d executor threads: %s", started, workers, exc)
        barrier.abort()
    loop.set_default_executor(executor)
    return started


def wait_for_stop_signal() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except NotImplementedError:  # Windows' loops have none: a plain handler wakes the loop instead
            signal.signal(sig, lambda _sig, _frame: loop.call_soon_threadsafe(stop.set))
    return stop


async def serve_until_signalled(controller: Controller, metrics: DaemonMetrics | None, metrics_hint: str,
                                boot_message: Callable[[], str], prepare: Callable[[], object] | None = None) -> None:
    """Start the controller, then its exporter (``metrics_hint`` names the option that moves a
    port in use), run ``prepare`` (what the daemon would rather build now than in its first
    requests, on the loop: the remoting layer's header codecs), print the boot line (tests and
    scripts wait for it on stdout), serve until SIGINT/SIGTERM, then close the exporter and shut
    the controller down cleanly."""
    raise_open_file_limit()
    keep_freed_heap()
    # Handlers first: a signal sent the moment the boot line appears must already drain.
    stop = wait_for_stop_signal()
    start_default_executor(asyncio.get_running_loop())
    await controller.start()
    if metrics is not None:
        await metrics.start(metrics_hint)
    if prepare is not None:
        prepare()  # before the freeze: what it builds lives as long as the daemon
    freeze_startup_heap()  # what start built lives as long as the daemon: no full collection walks it again
    message = boot_message()
    log.info(message)
    print(message, flush=True)
    await stop.wait()
    log.info("shutting down: %s", message.split(" boot success", 1)[0])
    if metrics is not None:
        await metrics.close()
    await controller.shutdown()
