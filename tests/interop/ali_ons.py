"""ali-ons (npm) driven by the Node scripts of tests/interop/node, for tests/interop/test_ali_ons.py.

Each script reads a JSON spec and prints one JSON event per line; `NodeScript` runs one as an
asyncio subprocess, collects its events, and bounds every wait: the script exits on its own at
its spec's deadline, and the test kills it if it has not exited a few seconds after that.
The npm packages are installed by `make test` (`npm ci` from the committed lock file, target
`interop-deps`); a machine without Node fails here with that instruction instead of skipping.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import shutil
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.waiting import wait_until

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
PINNED = "3.12.0"  # package.json's ali-ons, checked against what npm installed

Event = dict[str, Any]


def node_binary() -> str:
    """The `node` on PATH with ali-ons installed at the pinned version; fails the test otherwise."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the ali-ons interop tests need Node.js (>= 16) and npm")
    manifest = os.path.join(NODE_DIR, "node_modules", "ali-ons", "package.json")
    try:
        with open(manifest) as f:
            version = json.load(f)["version"]
    except FileNotFoundError:
        pytest.fail(f"ali-ons is not installed in {NODE_DIR}: run `make interop-deps` (npm ci there)")
    if version != PINNED:
        pytest.fail(f"ali-ons {version} is installed, the lock file pins {PINNED}: run `make interop-deps`")
    return node


def fresh(prefix: str) -> str:
    """A topic or group name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def body(size: int, seed: int) -> bytes:
    """``size`` bytes, half text (which deflate shrinks) and half random (which it cannot), so a
    compressed body is neither trivial nor larger than the limit."""
    rng = random.Random(seed)
    text = (f"ali-ons interop body {seed} " * (size // 40 + 1)).encode()[: size // 2]
    return text + rng.randbytes(size - len(text))


def _write_json(path: str, value: object) -> None:
    with open(path, "w") as f:
        json.dump(value, f)


class NodeScript:
    """One run of a tests/interop/node script: its events, and a bounded stop."""

    def __init__(self, name: str, spec: dict[str, Any], spec_path: str) -> None:
        self.name = name
        self.spec = spec
        self.spec_path = spec_path
        self.events: list[Event] = []
        self.stderr: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._readers: list[asyncio.Task[None]] = []

    @classmethod
    async def start(cls, tmp_dir: str, script: str, spec: dict[str, Any]) -> NodeScript:
        node = node_binary()
        spec_path = os.path.join(tmp_dir, f"{script}-{uuid.uuid4().hex[:8]}.json")
        await asyncio.to_thread(_write_json, spec_path, spec)
        run = cls(script, spec, spec_path)
        run.proc = await asyncio.create_subprocess_exec(
            node, os.path.join(NODE_DIR, f"{script}.js"), spec_path, cwd=NODE_DIR,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        run._readers = [asyncio.create_task(run._read_events()), asyncio.create_task(run._read_stderr())]
        return run

    async def _read_events(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            text = line.decode().strip()
            if text:
                self.events.append(json.loads(text))

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.stderr.append(line.decode().rstrip())

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e["event"] == kind]

    def report(self) -> str:
        """The script's tail, for assertion messages."""
        tail = [json.dumps(e)[:300] for e in self.events[-15:]]
        return f"{self.name} events:\n" + "\n".join(tail) + "\nstderr:\n" + "\n".join(self.stderr[-15:])

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Returns once ``predicate()`` holds; fails the test (with the script's tail) after ``timeout``
        or as soon as the script has exited without it holding."""
        proc = self.proc
        assert proc is not None
        await wait_until(lambda: predicate() or proc.returncode is not None, timeout)
        if not predicate():
            pytest.fail(f"{self.name}: condition not met within {timeout}s (exit {proc.returncode})\n"
                        + self.report())

    async def finish(self, timeout: float | None = None) -> int:
        """The exit code once the script has ended by itself; killed (and -9) if it has not after
        ``timeout`` (by default its own deadline plus 5 s)."""
        assert self.proc is not None
        bound = timeout if timeout is not None else self.spec["timeoutMs"] / 1000 + 5
        try:
            await asyncio.wait_for(self.proc.wait(), bound)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        await asyncio.wait_for(asyncio.gather(*self._readers), 5)
        assert self.proc.returncode is not None
        return self.proc.returncode

    async def stop(self, timeout: float = 15) -> int:
        """Asks a consumer to close (persisting its offsets) and returns its exit code."""
        assert self.proc is not None and self.proc.stdin is not None
        if self.proc.returncode is None:
            with contextlib.suppress(ConnectionError):
                self.proc.stdin.write(b"stop\n")
                await self.proc.stdin.drain()
                self.proc.stdin.close()
        return await self.finish(timeout)


class Scripts:
    """Every script a test started, killed at teardown if still running."""

    def __init__(self, tmp_dir: str, namesrv: str) -> None:
        self.tmp_dir = tmp_dir
        self.namesrv = namesrv
        self.started: list[NodeScript] = []

    async def start(self, script: str, timeout: float = 30, **spec: Any) -> NodeScript:
        s = await NodeScript.start(self.tmp_dir, script, {"nameSrv": self.namesrv, "timeoutMs": int(timeout * 1000),
                                                          **spec})
        self.started.append(s)
        return s

    async def produce(self, group: str, messages: list[dict[str, Any]], in_flight: int = 1,
                      timeout: float = 30) -> list[Event]:
        """The SendResults of ``messages`` (each a dict of the Message fields produce.js reads; ``body``
        as bytes), in message order; fails the test unless every send succeeded."""
        wire = [{**{k: v for k, v in m.items() if k != "body"}, "bodyB64": base64.b64encode(m["body"]).decode()}
                for m in messages]
        s = await self.start("produce", timeout, group=group, messages=wire, inFlight=in_flight)
        code = await s.finish()
        sent = sorted(s.of("sent"), key=lambda e: e["index"])
        assert code == 0 and len(sent) == len(messages), f"exit {code}\n" + s.report()
        assert all(e["sendStatus"] == "SEND_OK" for e in sent), s.report()
        return sent

    async def consumer(self, group: str, topic: str, timeout: float = 60, **spec: Any) -> NodeScript:
        s = await self.start("consume", timeout, group=group, topic=topic, **spec)
        await s.wait_for(lambda: bool(s.of("ready")), 20)
        return s

    async def pull(self, group: str, topic: str, sub_expression: str = "*", timeout: float = 30) -> NodeScript:
        s = await self.start("pull", timeout, group=group, topic=topic, subExpression=sub_expression)
        code = await s.finish()
        assert code == 0 and s.of("done"), f"exit {code}\n" + s.report()
        return s

    async def kill_all(self) -> None:
        for s in self.started:
            if s.proc is not None and s.proc.returncode is None:
                s.proc.kill()
                await s.proc.wait()
