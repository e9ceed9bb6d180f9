"""The blocking facade works from a plain script with no event loop, transactions included."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.daemons import ROOT, DaemonSet


def test_plain_script_sends_and_receives(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "sync_script.py"), ns.addr],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("SENT SEND_OK") == 3
    assert "GOT sync-0,sync-1,sync-2" in out.stdout


def test_plain_script_runs_transactions(daemons: DaemonSet) -> None:
    """The local transaction runs in the caller's thread, a check-back in a worker thread (never
    on the SDK's loop); committed and checked-back messages are consumed, the rolled-back one never."""
    ns = daemons.namesrv()
    daemons.broker(ns.addr, "transactionTimeOut=1000", "transactionCheckInterval=300")
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "sync_trans_script.py"),
                          ns.addr], capture_output=True, text=True, timeout=90, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert [line for line in lines if line.startswith("EXECUTE")] == [
        f"EXECUTE {b} arg-{b} True" for b in ("commit-me", "rollback-me", "check-me", "raise-me")]
    assert "RESULT commit-me SEND_OK COMMIT_MESSAGE" in lines
    assert "RESULT rollback-me SEND_OK ROLLBACK_MESSAGE" in lines
    assert "RESULT check-me SEND_OK UNKNOW" in lines and "RESULT raise-me SEND_OK UNKNOW" in lines
    assert "CHECKED True [(False, False)]" in lines
    assert "GOT check-me,commit-me,raise-me" in lines
