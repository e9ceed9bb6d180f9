"""mqstandalone --dashboard-port: the console served beside the embedded NameServer and Broker,
reading them, and stopped with them (exit 0)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request

import pytest

from tests.integration.daemons import ROOT, _spawn
from tests.waiting import wait_until

pytest.importorskip("starlette")


def test_standalone_serves_the_dashboard(tmp_path: str) -> None:
    standalone = _spawn("mqstandalone", ["rocketmq_py.standalone", "--port", "0", "--broker-port", "0",
                                         "--dashboard-port", "0", "--home", str(tmp_path)],
                        str(tmp_path), "boot success. serializeType=JSON and name server")
    try:
        broker_addr = standalone.addr
        # The console's boot line follows once uvicorn has started, in a task of its own.
        assert asyncio.run(wait_until(lambda: any("mqdashboard boot success" in ln for ln in standalone.lines), 30))
        line = next(ln for ln in standalone.lines if "mqdashboard boot success" in ln)
        url = "http://" + line.rsplit("address ", 1)[1].strip()
        with urllib.request.urlopen(url + "/", timeout=10) as r:
            page = r.read().decode()
        assert r.status == 200 and broker_addr in page and "broker-a" in page
        with urllib.request.urlopen(url + "/api/tps", timeout=10) as r:
            assert b'"putTps"' in r.read()
    finally:
        code = standalone.stop()
    assert code == 0, "\n".join(standalone.lines[-20:])


def test_mqdashboard_without_a_namesrv_is_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "rocketmq_py.tools.dashboard"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"},
                         stdin=subprocess.DEVNULL)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "no NameServer address" in lines[0], out.stderr
