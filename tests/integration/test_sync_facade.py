"""The blocking facade works from a plain script with no event loop."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.daemons import ROOT, start_broker, start_namesrv


def test_plain_script_sends_and_receives(tmp_path: str) -> None:
    ns = start_namesrv(os.path.join(str(tmp_path), "ns"))
    broker = start_broker(os.path.join(str(tmp_path), "b"), ns.addr)
    try:
        out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "sync_script.py"), ns.addr],
                             capture_output=True, text=True, timeout=60, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": ROOT})
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.count("SENT SEND_OK") == 3
        assert "GOT sync-0,sync-1,sync-2" in out.stdout
    finally:
        broker.stop()
        ns.stop()
