"""The README's run command: mqstandalone boots a NameServer and a Broker and passes its demo."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.daemons import ROOT, _spawn


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


def test_sigterm_during_the_demo_shuts_down_cleanly(tmp_path: str) -> None:
    """A SIGTERM sent as soon as the broker's boot line is out lands while the demo runs: the
    handlers are in place from the start, so it shuts down cleanly (exit 0), not killed by it."""
    standalone = _spawn("mqstandalone", ["rocketmq_py.standalone", "--port", "0", "--broker-port", "0",
                                         "--home", str(tmp_path)],
                        str(tmp_path), "boot success. serializeType=JSON and name server")
    assert standalone.stop() == 0, "\n".join(standalone.lines[-20:])
