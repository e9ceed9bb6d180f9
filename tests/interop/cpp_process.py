"""Scenarios of tests/interop/cpp_client.py run as subprocesses, their JSON lines collected.

A scenario's process is the only one that loads librocketmq: a crash or a hang of the C++
client fails its test (bounded by a timeout) and never takes the test process down with it.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import platform
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.daemons import ROOT

# The wheel (rocketmq 0.4.4, a dev dependency) carries librocketmq built for Linux x86-64 only.
SUPPORTED_PLATFORM = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")


@functools.cache
def load_error() -> str | None:
    """Why librocketmq cannot be loaded here, or None when it can (checked in a subprocess)."""
    probe = subprocess.run([sys.executable, "-c", "import rocketmq.ffi"], capture_output=True, text=True,
                           timeout=60)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


def require_cpp_client() -> None:
    """Skip where the library cannot load (another platform); fail where it should and does not."""
    error = load_error()
    if error is None:
        return
    if not SUPPORTED_PLATFORM:
        pytest.skip(f"librocketmq from PyPI rocketmq 0.4.4 is built for Linux x86-64 only; "
                    f"on {sys.platform}/{platform.machine()} it cannot load: {error}")
    pytest.fail(f"librocketmq (PyPI rocketmq==0.4.4, installed by the dev extra) does not load: {error}")


class CppProcess:
    """One scenario's process and the lines it has printed so far."""

    def __init__(self, scenario: str, args: dict[str, Any], home: str) -> None:
        env = {**os.environ, "HOME": home, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        argv = [sys.executable, "-m", "tests.interop.cpp_client", scenario, json.dumps(args)]
        self.home = home
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=home)
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stderr: queue.Queue[str] = queue.Queue()
        self._pumps = [threading.Thread(target=self._pump, daemon=True, name=f"cpp-{scenario}"),
                       threading.Thread(target=self._pump_stderr, daemon=True, name=f"cpp-{scenario}-err")]
        for t in self._pumps:
            t.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"kind": "noise", "text": raw.rstrip()}
            with self._lock:
                self.lines.append(line)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.put(raw)

    def _close(self) -> None:
        """After the process exited: the pumps read to EOF, then every pipe is closed."""
        for t in self._pumps:
            t.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def stderr(self) -> str:
        parts = []
        while not self._stderr.empty():
            parts.append(self._stderr.get_nowait())
        return "".join(parts)

    def client_log(self, lines: int = 40) -> str:
        """The end of the C++ client's own log ($HOME/logs/rocketmq-cpp): what it did before a
        failure its exception does not explain (a route it did not get, a connection it lost)."""
        logs = sorted(glob.glob(os.path.join(self.home, "logs", "rocketmq-cpp", "*")), key=os.path.getmtime)
        if not logs:
            return "(no client log)"
        with open(logs[-1], errors="replace") as f:
            return f"{logs[-1]}:\n" + "".join(f.readlines()[-lines:])

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [line for line in self.lines if line.get("kind") == kind]

    def messages(self) -> list[dict[str, Any]]:
        return self.of("msg")

    def wait_for(self, predicate: Callable[[CppProcess], bool], timeout: float, what: str) -> None:
        """Poll until ``predicate(self)`` holds; fail with what was seen after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; lines: {self.lines[-20:]}; "
                                     f"stderr: {self.stderr()[-2000:]}")
            if self.proc.poll() is not None and not predicate(self):
                for t in self._pumps:  # an exited process's last lines: the pumps read to EOF (bounded)
                    t.join(5)
                if predicate(self):
                    return
                raise AssertionError(f"the C++ client exited ({self.proc.returncode}) before {what}; "
                                     f"lines: {self.lines[-20:]}; stderr: {self.stderr()[-2000:]}; "
                                     f"its log: {self.client_log()}")
            time.sleep(0.05)

    def finish(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait for a scenario that ends by itself; its lines, or a failure with its stderr."""
        self._exited(timeout, f"C++ client did not finish in {timeout}s; lines: {self.lines[-20:]}")
        return list(self.lines)

    def _exited(self, timeout: float, late: str) -> None:
        """The client waited for (killed, and ``late`` raised, when it outlives ``timeout``), its
        pipes closed, and its exit code 0."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            self._close()
            raise AssertionError(late) from None
        self._close()
        assert self.proc.returncode == 0, (f"C++ client exited {self.proc.returncode}: {self.stderr()[-3000:]}\n"
                                           f"its log: {self.client_log()}")

    def stop(self, timeout: float = 30.0) -> None:
        """Ask a push consumer to shut down (committing its offsets) and wait for it, bounded."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
        self._exited(timeout, f"C++ consumer did not stop within {timeout}s")
        assert not self.of("error"), self.of("error")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close()


class CppClients:
    """Every C++ process one test starts; any still running at the end is killed."""

    def __init__(self, namesrv: str, home: str) -> None:
        self.namesrv = namesrv
        self.home = home
        self.started: list[CppProcess] = []

    def start(self, scenario: str, **args: Any) -> CppProcess:
        p = CppProcess(scenario, {"namesrv": self.namesrv, **args}, self.home)
        self.started.append(p)
        return p

    def produce(self, topic: str, group: str, mode: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send and wait; the per-message results, each checked SEND_OK (status 0)."""
        lines = self.start("produce", topic=topic, group=group, mode=mode, messages=messages).finish()
        sent = [line for line in lines if line["kind"] == "sent"]
        failed = [line for line in lines if line["kind"] == "failed"]
        assert not failed, failed
        assert all(line.get("status", 0) == 0 for line in sent), sent
        return sent

    def push(self, topic: str, group: str, **args: Any) -> CppProcess:
        """A started push consumer (it has said ``started``)."""
        p = self.start("push", topic=topic, group=group, **args)
        p.wait_for(lambda q: bool(q.of("started")), 30, "the push consumer to start")
        return p

    def close(self) -> None:
        for p in self.started:
            p.kill()
