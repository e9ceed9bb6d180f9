"""Run the CLIs (the operator tools and the daemons' own) as real subprocesses, bounded in time."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from tests.integration.daemons import ROOT

CLI_MODULES = {"mqadmin": "rocketmq_py.tools.mqadmin", "mqbench": "rocketmq_py.tools.benchmark",
               "mqcluster": "rocketmq_py.tools.mqcluster", "mqnamesrv": "rocketmq_py.namesrv.startup",
               "mqbroker": "rocketmq_py.broker.startup", "mqstandalone": "rocketmq_py.standalone"}


@dataclass
class CliResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def ok(self) -> CliResult:
        assert self.returncode == 0, f"{self.args} exited {self.returncode}: {self.stderr}\n{self.stdout}"
        return self

    def failed_with_one_line(self, *fragments: str) -> str:
        """Assert the command failed (non-zero) and explained why on exactly one stderr line."""
        assert self.returncode != 0, f"{self.args} should have failed; stdout:\n{self.stdout}"
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, f"{self.args}: expected one error line, got:\n{self.stderr}"
        for fragment in fragments:
            assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
        return lines[0]


def _env(env: dict[str, str] | None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return {**base, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1", "COLUMNS": "250", **(env or {})}


def run_cli(tool: str, *args: str, env: dict[str, str] | None = None, timeout: float = 90.0) -> CliResult:
    cmd = [sys.executable, "-m", CLI_MODULES[tool], *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=_env(env),
                         stdin=subprocess.DEVNULL)
    return CliResult(list(args), out.returncode, out.stdout, out.stderr)


async def run_cli_async(tool: str, *args: str, env: dict[str, str] | None = None, timeout: float = 90.0
                        ) -> CliResult:
    """The same from an async test: the test's own loop (and its clients) keep running meanwhile."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", CLI_MODULES[tool], *args, cwd=ROOT,
                                                env=_env(env), stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return CliResult(list(args), proc.returncode or 0, stdout.decode(), stderr.decode())
