"""What the HA tests share: a master and its slave as real daemons, their CommitLogs read from disk,
the HA port a broker bound (read from its log), and the options of each role."""

from __future__ import annotations

import os
import re
import time

from tests.integration.daemons import Daemon, DaemonSet

# Short intervals so a test sees heartbeats, reconnects and housekeeping within seconds.
HA_OPTIONS = ("haSendHeartbeatInterval=500", "haHousekeepingInterval=5000", "registerNameServerPeriod=10000",
              "messageIndexInChildProcess=false")
_HA_LINE = re.compile(r"HAService listening on ([\d.]+):(\d+)")


def master(daemons: DaemonSet, ns: str, role: str = "ASYNC_MASTER", *options: str, name: str = "ha-m",
           broker_name: str = "broker-ha") -> Daemon:
    return daemons.broker(ns, f"brokerRole={role}", f"brokerName={broker_name}", *HA_OPTIONS, *options, name=name)


def slave(daemons: DaemonSet, ns: str, *options: str, name: str = "ha-s", broker_name: str = "broker-ha",
          broker_id: int = 1) -> Daemon:
    return daemons.broker(ns, "brokerRole=SLAVE", f"brokerId={broker_id}", f"brokerName={broker_name}", *HA_OPTIONS,
                          *options, name=name)


def ha_addr(broker: Daemon, timeout: float = 10.0) -> tuple[str, int]:
    """The HA address ``broker`` listens on, from its log (polled, bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _HA_LINE.findall(log_text(broker))
        if found:
            host, port = found[-1]
            return host, int(port)
        time.sleep(0.05)
    raise TimeoutError(f"{broker.name} logged no HA address")


def log_files(broker: Daemon) -> dict[int, str]:
    """Each CommitLog file of ``broker``'s store by its first offset."""
    root = os.path.join(broker.home, "store", "commitlog")
    return {int(name): os.path.join(root, name) for name in sorted(os.listdir(root))} if os.path.isdir(root) else {}


def log_bytes(broker: Daemon, start: int, end: int) -> bytes:
    """The CommitLog bytes of ``broker`` in ``[start, end)`` (within one file), read from disk."""
    for first, path in log_files(broker).items():
        size = os.path.getsize(path)
        if first <= start < first + size:
            with open(path, "rb") as f:
                f.seek(start - first)
                return f.read(min(end, first + size) - start)
    return b""


def record_at(broker: Daemon, offset: int) -> bytes:
    """The whole record at ``offset`` of ``broker``'s CommitLog (b"" when there is none)."""
    head = log_bytes(broker, offset, offset + 4)
    size = int.from_bytes(head, "big", signed=True) if len(head) == 4 else 0
    return log_bytes(broker, offset, offset + size) if size > 0 else b""


def log_text(broker: Daemon) -> str:
    path = os.path.join(broker.home, "logs", "rocketmqlogs", "broker.log")
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()
