"""The README's run command: mqstandalone boots, serves and passes its own demo."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.daemons import ROOT


def test_standalone_demo_runs_end_to_end(tmp_path: str) -> None:
    out = subprocess.run([sys.executable, "-m", "mqstandalone", "--demo-only", "--port", "0", "--home", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    assert "The Name Server boot success" in out.stdout
    assert "REGISTER_BROKER demo-broker -> code 0" in out.stdout
    assert "'brokerName': 'demo-broker'" in out.stdout
