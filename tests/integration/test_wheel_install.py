"""The project as a user gets it: a wheel built from the checkout, installed into a fresh venv outside
it, and run from a directory of the user's own that holds a ``client.py`` and a ``tools/`` package.

One wheel and one venv serve the whole module (building and installing is most of its time).
pip resolves the dependencies as a user's would, from the configured registries and pip's cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration.daemons import ROOT

CONSOLE_SCRIPTS = ("mqadmin", "mqbench", "mqbroker", "mqcluster", "mqdashboard", "mqnamesrv", "mqstandalone")


@dataclass
class Installed:
    wheel: str
    venv: str
    user_dir: str  # the user's project: client.py and tools/ of their own
    build_output: str
    install_output: str

    def bin(self, name: str) -> str:
        return os.path.join(self.venv, "bin", name)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # No PYTHONPATH: only what the venv installed, and the user's directory as the cwd.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NAMESRV_ADDR", "VIRTUAL_ENV")}
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=self.user_dir,
                              env={**env, "HOME": self.user_dir, "PYTHONUNBUFFERED": "1"},
                              stdin=subprocess.DEVNULL)


def _check(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = str(tmp_path_factory.mktemp("wheel"))
    dist = os.path.join(base, "dist")
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = os.path.join(base, "source")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv*", ".git", "node_modules", "build", "dist",
                                                                 "*.egg-info", "__pycache__", ".*_cache", "tests"))
    # the default build, whatever the mypyc test run (make test) has in its environment
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_PY_MYPYC"}
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, source],
                           capture_output=True, text=True, timeout=300, cwd=base, env=env)
    _check(build)
    wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
    assert len(wheels) == 1, wheels
    # pure Python, one wheel for every platform: mypyc's compiled build is opt-in (setup.py)
    assert wheels[0].endswith("-py3-none-any.whl"), wheels
    venv = os.path.join(base, "venv")
    _check(subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True, text=True,
                          timeout=120))
    install = subprocess.run([sys.executable, "-m", "pip", "--python", os.path.join(venv, "bin", "python"),
                              "install", os.path.join(dist, wheels[0])],
                             capture_output=True, text=True, timeout=600, cwd=base)
    _check(install)
    user_dir = os.path.join(base, "myproject")
    os.makedirs(os.path.join(user_dir, "tools"))
    with open(os.path.join(user_dir, "client.py"), "w") as f:
        f.write('WHO = "the user\'s own client.py"\n')
    with open(os.path.join(user_dir, "tools", "__init__.py"), "w") as f:
        f.write('WHO = "the user\'s own tools package"\n')
    yield Installed(os.path.join(dist, wheels[0]), venv, user_dir, build.stdout + build.stderr,
                    install.stdout + install.stderr)


def _noise(output: str) -> list[str]:
    """Warnings about the project (its metadata, its build), not about the machine's index config."""
    return [ln for ln in output.splitlines()
            if re.search(r"deprecat|license|warning", ln, re.I) and not ln.startswith("WARNING: Location ")]


def test_the_wheel_holds_one_top_level_package(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        names = whl.namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"rocketmq_py"}
    for required in ("rocketmq_py/py.typed", "rocketmq_py/conf/namesrv.conf", "rocketmq_py/conf/broker.conf",
                     "rocketmq_py/conf/2m-noslave/broker-a.properties", "rocketmq_py/standalone.py",
                     "rocketmq_py/client/producer.py", "rocketmq_py/client/spark/source.py",
                     "rocketmq_py/tools/dashboard/templates/base.html"):
        assert required in names, required
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(installed.wheel) as whl:
        scripts = whl.read(entry_points).decode()
    for script in CONSOLE_SCRIPTS:
        assert re.search(rf"^{script} = rocketmq_py\.", scripts, re.M), scripts


def test_building_and_installing_print_no_warning_about_the_project(installed: Installed) -> None:
    assert _noise(installed.build_output) == []
    assert _noise(installed.install_output) == []
    site = _check(installed.run(installed.bin("python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])")).strip()
    ours = [n for n in os.listdir(site) if n.startswith("rocketmq_py")]
    assert sorted(ours) == ["rocketmq_py", next(n for n in ours if n.endswith(".dist-info"))]
    generic = {"client", "broker", "store", "remoting", "namesrv", "tools", "conf", "mqstandalone.py"}
    assert generic.isdisjoint(os.listdir(site))


def test_mqstandalone_runs_its_demo_on_free_ports(installed: Installed) -> None:
    out = _check(installed.run(installed.bin("mqstandalone"), "--demo-only", "--port", "0", "--broker-port", "0",
                               "--home", os.path.join(installed.user_dir, "standalone")))
    assert "boot success" in out
    assert len(re.findall(r"demo: pulled offset \d+: 'hello rocketmq-py #\d'", out)) == 3


SDK_SCRIPT = textwrap.dedent('''
    import asyncio, sys, time

    import client, tools  # the user's own modules, beside this script
    from rocketmq_py.client import LitePullConsumer, Message, Producer
    from rocketmq_py.tools.mqadmin import main as mqadmin_main  # importable beside the user's tools/

    assert client.WHO == "the user's own client.py" and tools.WHO == "the user's own tools package"
    assert callable(mqadmin_main)

    async def main(namesrv: str) -> None:
        async with Producer("wheel_producer", namesrv) as producer:
            sent = await producer.send(Message("WheelTopic", b"from a wheel", tags="w"))
        consumer = LitePullConsumer("wheel_consumer", namesrv)
        async with consumer:
            consumer.assign([sent.message_queue])
            consumer.seek(sent.message_queue, sent.queue_offset)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                got = [m for m in await consumer.poll(1.0) if m.queue_offset == sent.queue_offset]
                if got:
                    print("read back:", got[0].body.decode(), sent.send_status.name)
                    return
        raise SystemExit("the message sent was not read back within 30 s")

    asyncio.run(main(sys.argv[1]))
''')


def test_mqcluster_mqadmin_and_the_sdk_beside_a_users_client_py(installed: Installed) -> None:
    home = os.path.join(installed.user_dir, "cluster")
    up = _check(installed.run(installed.bin("mqcluster"), "up", "--free-ports", "--home", home))
    try:
        namesrv = re.search(r"export NAMESRV_ADDR=(\S+)", up)
        assert namesrv, up
        listed = _check(installed.run(installed.bin("mqadmin"), "clusterList", "-n", namesrv.group(1)))
        assert "broker-a" in listed and "broker-b" in listed and "DefaultCluster" in listed
        # python -m from the user's directory puts it first on sys.path: their tools/ must not matter
        again = _check(installed.run(installed.bin("python"), "-m", "rocketmq_py.tools.mqadmin", "clusterList",
                                     "-n", namesrv.group(1)))
        assert "broker-a" in again
        script = os.path.join(installed.user_dir, "app.py")
        with open(script, "w") as f:
            f.write(SDK_SCRIPT)
        out = _check(installed.run(installed.bin("python"), script, namesrv.group(1)))
        assert "read back: from a wheel SEND_OK" in out
    finally:
        down = installed.run(installed.bin("mqcluster"), "down", "--home", home)
    _check(down)
