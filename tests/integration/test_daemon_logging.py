"""The daemons' one logging setup: a log file under the home dir with RocketMQ's start-up lines."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.daemons import ROOT, DaemonSet, _spawn


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_namesrv_and_broker_write_rocketmq_logs(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, name="broker-log")
    ns_log = os.path.join(ns.home, "logs", "rocketmqlogs", "namesrv.log")
    broker_log = os.path.join(broker.home, "logs", "rocketmqlogs", "broker.log")
    ns_text = _read(ns_log)
    assert "The Name Server boot success. serializeType=JSON" in ns_text
    assert "rocketmq.config - listenPort=0" in ns_text and "kvConfigPath=" in ns_text
    broker_text = _read(broker_log)
    assert f"The broker[broker-log, {broker.addr}] boot success" in broker_text
    assert "rocketmq.config - brokerName=broker-log" in broker_text and "flushDiskType=" in broker_text
    # The config dump stays out of the console, where tests and operators look for the boot line.
    assert not any("rocketmq.config" in line for line in broker.lines)
    broker.stop()
    assert "shutting down" in _read(broker_log)


def test_log_dir_and_level_flags(tmp_path: str) -> None:
    home = os.path.join(str(tmp_path), "ns")
    log_dir = os.path.join(str(tmp_path), "elsewhere")
    os.makedirs(home)
    d = _spawn("mqnamesrv", ["rocketmq_py.namesrv.startup", "--home", home, "--listen-port", "0",
                             "--bind-address", "127.0.0.1", "--log-dir", log_dir, "--log-level", "WARNING"],
               home, "The Name Server boot success")
    try:
        text = _read(os.path.join(log_dir, "namesrv.log"))
        assert "boot success" not in text and "listenPort=" not in text  # INFO is below WARNING
        assert not os.path.exists(os.path.join(home, "logs", "rocketmqlogs", "namesrv.log"))
    finally:
        assert d.stop() == 0
    bad = subprocess.run([sys.executable, "-m", "rocketmq_py.namesrv.startup", "--home", home, "--listen-port", "0",
                          "--log-level", "LOUD"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == ["mqnamesrv: cannot start: unknown log level 'LOUD'"]
