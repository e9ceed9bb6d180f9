"""The bare ceiling every remoting figure is judged against: an asyncio-streams TCP echo.

4-byte big-endian length prefix + 1 KiB payload, server in its own process on 127.0.0.1, client
in the calling process; in-flight k means k frames outstanding (a semaphore, one sender and one
receiver task, as ``shared/bench/peerbench/ceilings.py`` does). The echo does no parsing beyond
the prefix, so a protocol's ratio to it is the share of the box it leaves for real work.

    python bench/echo.py serve --port P      # the server (used as a subprocess)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

PAYLOAD = 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Poll until something accepts on 127.0.0.1:port (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop_process(proc: subprocess.Popen[Any], grace: float) -> None:
    """A server process stopped: SIGTERM, and SIGKILL when it has not exited within ``grace`` s."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def subprocess_server(args: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process until the block ends; stopped by PID (SIGTERM, then SIGKILL)."""
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(port, proc)
        yield proc
    finally:
        stop_process(proc, 5)
        if proc.stderr:
            proc.stderr.close()


@contextlib.contextmanager
def echo_server() -> Iterator[int]:
    port = free_port()
    with subprocess_server([os.path.abspath(__file__), "serve", "--port", str(port)], port):
        yield port


async def measure_streams_echo(port: int, in_flight: int, duration: float, payload_size: int = PAYLOAD) -> float:
    """Round trips per second over one connection for ``duration`` seconds (bounded), with frames
    of ``payload_size`` bytes (bench/scale.py's 1 MiB ceiling)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=max(1 << 16, 2 * payload_size))
    payload = os.urandom(payload_size)
    frame = len(payload).to_bytes(4, "big") + payload
    sem = asyncio.Semaphore(in_flight)
    sent = received = 0
    sender_done = False
    all_back = asyncio.Event()
    deadline = time.perf_counter() + duration
    t0 = time.perf_counter()

    async def sender() -> None:
        nonlocal sent, sender_done
        while time.perf_counter() < deadline:
            await sem.acquire()
            writer.write(frame)
            sent += 1
            if writer.transport.get_write_buffer_size() > (1 << 20):
                await writer.drain()
        sender_done = True
        if received == sent:
            all_back.set()

    async def receiver() -> None:
        nonlocal received
        while True:
            hdr = await reader.readexactly(4)
            await reader.readexactly(int.from_bytes(hdr, "big"))
            received += 1
            sem.release()
            if sender_done and received == sent:
                all_back.set()

    rt = asyncio.create_task(receiver())
    await asyncio.wait_for(sender(), duration + 30)
    await asyncio.wait_for(all_back.wait(), 30)
    elapsed = time.perf_counter() - t0
    rt.cancel()
    writer.close()
    return received / elapsed


def streams_echo_rps(in_flight: int, duration: float = 3.0) -> float:
    """One measurement against a fresh echo server process (for benches that need one figure)."""
    from rocketmq_py.common.loop import run

    with echo_server() as port:
        return run(measure_streams_echo(port, in_flight, duration))


async def _echo_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            hdr = await reader.readexactly(4)
            body = await reader.readexactly(int.from_bytes(hdr, "big"))
            writer.write(hdr + body)
            if writer.transport.get_write_buffer_size() > (1 << 20):
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _serve(port: int, max_life: float) -> None:
    # A buffer for two 1 MiB frames (bench/scale.py), so large frames are not read in 64 KiB
    # pause/resume steps that would lower the ceiling.
    server = await asyncio.start_server(_echo_handler, "127.0.0.1", port, limit=1 << 21)
    async with server:
        await asyncio.sleep(max_life)  # a safety net: the driver stops us by PID


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["serve"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-life", type=float, default=1800.0)
    ns = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from rocketmq_py.common.loop import run as _run

    _run(_serve(ns.port, ns.max_life))
