"""The README's run command: mqstandalone boots a NameServer and a Broker and passes its demo."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.daemons import ROOT


def test_standalone_demo_runs_end_to_end(tmp_path: str) -> None:
    out = subprocess.run([sys.executable, "-m", "rocketmq_py.standalone", "--demo-only", "--port", "0",
                          "--broker-port", "0", "--home", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    assert "The Name Server boot success" in out.stdout and "boot success. serializeType=JSON and name" in out.stdout
    assert "demo: sent 3 messages" in out.stdout
    for i in range(3):
        assert f"'hello rocketmq-py #{i}'" in out.stdout
    assert "route of DemoTopic from the NameServer -> code 0" in out.stdout
    assert os.path.isdir(os.path.join(str(tmp_path), "store", "commitlog"))
