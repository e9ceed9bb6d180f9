"""Real daemons as subprocesses on 127.0.0.1, for every integration test.

Each daemon listens on port 0 and prints its boot line with the bound address; the helper reads
that line (bounded by a timeout) instead of guessing a free port, so parallel runs never race.
Stopping is by PID: SIGTERM, then SIGKILL if it has not exited within the grace period.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[str]
    addr: str
    home: str
    lines: list[str] = field(default_factory=list)
    killed: bool = False  # SIGKILLed on purpose: its exit code says nothing about a clean shutdown

    @property
    def port(self) -> int:
        return int(self.addr.rsplit(":", 1)[1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(grace)
        return self.proc.returncode

    def kill(self) -> None:
        self.killed = True
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _spawn(name: str, args: list[str], home: str, boot_marker: str, timeout: float = 30.0) -> Daemon:
    """Start ``python -m <args>`` and wait (bounded) for the line containing ``boot_marker``."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=home)
    lines: list[str] = []
    q: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            q.put(line)
        q.put(None)
        proc.stdout.close()

    threading.Thread(target=pump, name=f"{name}-stdout", daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            proc.kill()
            raise TimeoutError(f"{name} did not boot within {timeout}s; output:\n" + "\n".join(lines[-30:]))
        try:
            line = q.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            proc.wait(5)
            raise RuntimeError(f"{name} exited with {proc.returncode} before booting; output:\n"
                               + "\n".join(lines[-30:]))
        if boot_marker in line:
            if "address " in line:
                addr = line.rsplit("address ", 1)[1].strip()
            else:  # Java's broker line: "The broker[name, ip:port] boot success. ..."
                addr = line.split("[", 1)[1].split("]", 1)[0].split(", ", 1)[1]
            return Daemon(name, proc, addr, home, lines)


def start_namesrv(home: str, *options: str, config_file: str | None = None, timeout: float = 30.0) -> Daemon:
    """A NameServer on 127.0.0.1 with a free port and its own home dir; ``options`` are key=value
    overrides applied after ``config_file`` (a RocketMQ properties file, as ``-c`` takes)."""
    os.makedirs(home, exist_ok=True)
    args = ["rocketmq_py.namesrv.startup", "--home", home, "--listen-port", "0", "--bind-address", "127.0.0.1"]
    if config_file is not None:
        args += ["-c", config_file]
    for option in options:
        args += ["-o", option]
    return _spawn("mqnamesrv", args, home, "The Name Server boot success", timeout)


def start_broker(home: str, namesrv_addr: str, *options: str, name: str = "broker-a", timeout: float = 60.0) -> Daemon:
    """A Broker on 127.0.0.1 with a free port, its store under ``home``, registered with ``namesrv_addr``."""
    os.makedirs(home, exist_ok=True)
    args = ["rocketmq_py.broker.startup", "-n", namesrv_addr, "--listen-port", "0",
            "--store", os.path.join(home, "store"),
            "-o", "brokerIP1=127.0.0.1", "-o", "bindAddress=127.0.0.1", "-o", f"brokerName={name}",
            "-o", f"rocketmqHome={home}"]
    for option in options:
        args += ["-o", option]
    return _spawn(f"mqbroker-{name}", args, home, "boot success", timeout)


def start_dashboard(home: str, namesrv_addr: str, timeout: float = 30.0) -> Daemon:
    """mqdashboard on 127.0.0.1 with a free port, reading the cluster of ``namesrv_addr``."""
    os.makedirs(home, exist_ok=True)
    return _spawn("mqdashboard", ["rocketmq_py.tools.dashboard", "-n", namesrv_addr, "--host", "127.0.0.1",
                                  "--port", "0"], home, "mqdashboard boot success", timeout)


class DaemonSet:
    """Every daemon one test started, under one temp dir; stopping them all is the fixture's job.

    The ``daemons`` fixture of tests/integration/conftest.py hands one of these to a test, so a
    test asks for the NameServers and Brokers it needs instead of writing its own start/stop.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.started: list[Daemon] = []

    def namesrv(self, *options: str, name: str = "ns", config_file: str | None = None) -> Daemon:
        d = start_namesrv(os.path.join(self.root, name), *options, config_file=config_file)
        self.started.append(d)
        return d

    def broker(self, namesrv_addr: str, *options: str, name: str = "broker-a") -> Daemon:
        d = start_broker(os.path.join(self.root, name), namesrv_addr, *options, name=name)
        self.started.append(d)
        return d

    def dashboard(self, namesrv_addr: str, name: str = "dashboard") -> Daemon:
        d = start_dashboard(os.path.join(self.root, name), namesrv_addr)
        self.started.append(d)
        return d

    def stop_all(self) -> dict[str, int]:
        """SIGTERM every daemon still running, newest first (brokers before the NameServers they
        unregister from); returns the exit codes of those not killed on purpose."""
        codes: dict[str, int] = {}
        for d in reversed(self.started):
            code = d.stop()
            if not d.killed:
                codes[f"{d.name}@{d.addr}"] = code
        return codes
