"""The README cannot rot: every ```python block runs as printed against a standalone this module
starts, and every shell command of its ```bash blocks is exercised by a test named here.

What a test must change in a printed command or block, and nothing else: the NameServer address
(the standalone listens on free ports, so its address replaces 127.0.0.1:9876), free ports and
temporary homes where a command would take 9876/10911 or ~/.rocketmq-py, and the lengths of the
benchmark runs.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.daemons import ROOT, _spawn

README = os.path.join(ROOT, "README.md")
BIN = os.path.dirname(sys.executable)  # the console scripts of this install (.venv/bin under make)
PRINTED_NAMESRV = "127.0.0.1:9876"


def _blocks(lang: str) -> list[str]:
    with open(README, encoding="utf-8") as f:
        return re.findall(rf"^```{lang}\n(.*?)^```$", f.read(), re.M | re.S)


def _commands() -> list[str]:
    lines = (ln.split("#", 1)[0].strip() if ln.lstrip().startswith("#") else ln.split("  #", 1)[0].strip()
             for block in _blocks("bash") for ln in block.splitlines())
    return [ln for ln in lines if ln]  # a line that is only a comment continues the one above


# Each shell command of the README, and the test that runs it (module::function).
EXERCISED = {
    "make run": "tests/integration/test_readme.py::test_make_run_as_printed",
    'make run ARGS="--port 0 --broker-port 0"': "tests/integration/test_readme.py::test_make_run_as_printed",
    "make test": "CI: .ci/run",
    ".venv/bin/mqnamesrv -c conf/namesrv.conf": "tests/integration/test_readme.py::test_running_the_daemons_yourself",
    ".venv/bin/mqbroker -n 127.0.0.1:9876 -c conf/broker.conf":
        "tests/integration/test_readme.py::test_running_the_daemons_yourself",
    ".venv/bin/mqbroker -p": "tests/integration/test_readme.py::test_running_the_daemons_yourself",
    ".venv/bin/python bench/remoting_rtt.py": "tests/integration/test_readme.py::test_bench_scripts_as_printed",
    ".venv/bin/python bench/namesrv_route.py": "tests/integration/test_readme.py::test_bench_scripts_as_printed",
    ".venv/bin/python bench/store_append.py": "tests/integration/test_readme.py::test_bench_scripts_as_printed",
    ".venv/bin/python bench/broker_send.py": "tests/integration/test_readme.py::test_bench_scripts_as_printed",
    ".venv/bin/python bench/recovery.py": "tests/integration/test_readme.py::test_bench_scripts_as_printed",
    # No container engine in CI: the compose file is checked against conf/ and mqcluster's topology.
    "docker compose up -d --build": "tests/integration/test_mqcluster.py::test_compose_file_matches_conf_and_mqcluster",
    "CLUSTER_TOPOLOGY=2m-2s-sync docker compose --profile slaves up -d --build":
        "tests/integration/test_mqcluster.py::test_compose_file_matches_conf_and_mqcluster",
    "export NAMESRV_ADDR=127.0.0.1:9876": "tests/integration/test_readme.py::test_operator_commands_as_printed",
    ".venv/bin/mqcluster up": "tests/integration/test_mqcluster.py::test_mqcluster_up_admin_flow_and_down",
    ".venv/bin/mqcluster status": "tests/integration/test_mqcluster.py::test_mqcluster_up_admin_flow_and_down",
    ".venv/bin/mqcluster down": "tests/integration/test_mqcluster.py::test_mqcluster_up_admin_flow_and_down",
    "mqadmin clusterList": "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqadmin updateTopic -c DefaultCluster -t Orders -r 4 -w 4":
        "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqadmin sendMessage -t Orders -p 'hello' -k order-1 -c TagA":
        "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqadmin consumeMessage -t Orders -g billing -c 10":
        "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqadmin consumerProgress -g billing --json": "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqadmin queryMsgByKey -t Orders -k order-1": "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqbench produce -t BenchmarkTest -s 1024 -w 32 -d 60":
        "tests/integration/test_readme.py::test_operator_commands_as_printed",
    "mqbench consume -t BenchmarkTest -g bench -m 100000":
        "tests/integration/test_readme.py::test_operator_commands_as_printed",
}


def test_every_readme_shell_command_is_exercised_by_a_named_test() -> None:
    commands = _commands()
    assert len(commands) >= 20, commands
    assert [c for c in commands if c not in EXERCISED] == [], "a README command no test runs: add it to EXERCISED"
    for where in set(EXERCISED.values()):
        if where.startswith("CI: "):
            with open(os.path.join(ROOT, where[4:])) as f:
                assert "make test" in f.read()
            continue
        path, func = where.split("::")
        module = importlib.import_module(path[:-3].replace("/", "."))
        assert callable(getattr(module, func, None)), where


def _user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "NAMESRV_ADDR", "PYTHONPATH")}
    return {**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **extra}


def _run(argv: list[str], cwd: str = ROOT, timeout: float = 300, **env: str) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=_user_env(**env),
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"{argv} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone as the README's filter section starts one (SQL92 filtering on), on free ports."""
    home = str(tmp_path_factory.mktemp("readme-standalone"))
    d = _spawn("mqstandalone", ["rocketmq_py.standalone", "--port", "0", "--broker-port", "0", "--home", home,
                                "-o", "enablePropertyFilter=true"], home,
               "boot success. serializeType=JSON and name server")
    try:
        yield next(ln for ln in d.lines if "The Name Server boot success" in ln).rsplit("address ", 1)[1].strip()
    finally:
        assert d.stop() == 0, "\n".join(d.lines[-20:])


def _block_id(block: str) -> str:
    first = next(ln for ln in block.splitlines() if ln.startswith(("from rocketmq_py", "import rocketmq_py")))
    return re.sub(r"\W+", "_", first.split(" import ")[-1])[:40]


@pytest.mark.parametrize("block", [pytest.param(b, marks=[pytest.mark.slow] if "pyspark" in b else [])
                                   for b in _blocks("python")], ids=_block_id)
def test_readme_python_block_runs_as_printed(block: str, namesrv: str, tmp_path: str) -> None:
    if "pyspark" in block:
        pytest.importorskip("pyspark", reason="the spark extra is not installed")
    assert PRINTED_NAMESRV in block, "a block that talks to a NameServer names the one `make run` starts"
    script = os.path.join(str(tmp_path), "readme_block.py")
    with open(script, "w") as f:
        f.write(block.replace(PRINTED_NAMESRV, namesrv))
    out = _run([sys.executable, script], cwd=str(tmp_path))
    assert out.strip(), "every block prints what it did"
    if "MessageSelector.by_sql" in block:
        assert out.strip().splitlines()[-1] == "b'a=7 us'", out
    if "TransactionProducer" in block:
        assert "SEND_OK" in out and "COMMIT_MESSAGE" in out, out


def _make_run_recipe(args: str) -> list[str]:
    """The command ``make run ARGS=...`` runs, read from make itself (-n prints without running)."""
    out = subprocess.run(["make", "-n", "-s", "-C", ROOT, "run", f"ARGS={args}"], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    return shlex.split(out.stdout.strip().splitlines()[-1])


def test_make_run_as_printed(tmp_path: str) -> None:
    assert _make_run_recipe("") == [".venv/bin/mqstandalone"]
    recipe = _make_run_recipe("--port 0 --broker-port 0")
    assert recipe == [".venv/bin/mqstandalone", "--port", "0", "--broker-port", "0"]
    # The recipe's script, from this install, told to stop after its demo and to keep its data here.
    out = _run([os.path.join(BIN, "mqstandalone"), *recipe[1:], "--demo-only", "--home", str(tmp_path)])
    assert len(re.findall(r"demo: pulled offset", out)) == 3, out


def test_running_the_daemons_yourself(tmp_path: str) -> None:
    """The three commands, with free ports and a temporary home added (flags override the conf)."""
    ns = _spawn("mqnamesrv", ["rocketmq_py.namesrv.startup", "-c", os.path.join(ROOT, "conf", "namesrv.conf"),
                              "-l", "0", "--bind-address", "127.0.0.1", "--home", str(tmp_path)], str(tmp_path),
                "The Name Server boot success")
    broker_home = os.path.join(str(tmp_path), "broker")
    os.makedirs(broker_home)
    try:
        broker = _spawn("mqbroker", ["rocketmq_py.broker.startup", "-n", ns.addr, "-c",
                                     os.path.join(ROOT, "conf", "broker.conf"), "-l", "0", "--store",
                                     os.path.join(broker_home, "store"), "-o", "bindAddress=127.0.0.1",
                                     "-o", f"rocketmqHome={broker_home}"], broker_home, "boot success")
        assert broker.stop() == 0
    finally:
        assert ns.stop() == 0
    printed = _run([os.path.join(BIN, "mqbroker"), "-p"])
    assert "brokerName=" in printed and "listenPort=10911" in printed and "storePathRootDir=" in printed


# What makes each benchmark brief: a fraction of a second (or a small log) and one round.
BENCH_BRIEF = {"broker_send.py": ["--seconds", "0.2", "--rounds", "1", "--backlog", "2000"],
               "recovery.py": ["--mib", "8", "--rounds", "1"]}


def test_bench_scripts_as_printed() -> None:
    """Each benchmark as printed, briefly (BENCH_BRIEF; the others take --seconds and --rounds)."""
    for command in [c for c in _commands() if c.startswith(".venv/bin/python bench/")]:
        argv = shlex.split(command)
        extra = BENCH_BRIEF.get(os.path.basename(argv[1]), ["--seconds", "0.2", "--rounds", "1"])
        out = _run([sys.executable, *argv[1:], *extra], timeout=180)
        figures = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
        assert figures and all(isinstance(v, int | float) for v in figures.values()), out


def test_operator_commands_as_printed(namesrv: str) -> None:
    """The mqadmin and mqbench lines in order, with NAMESRV_ADDR exported as printed (the address
    the standalone got); the benchmark runs 1 s / 200 messages instead of 60 s / 100,000."""
    commands = [c for c in _commands() if c.startswith(("mqadmin", "mqbench"))]
    assert f"export NAMESRV_ADDR={PRINTED_NAMESRV}" in _commands()
    outputs: dict[str, str] = {}
    for command in commands:
        argv = shlex.split(command.replace("-d 60", "-d 1").replace("-m 100000", "-m 200"))
        outputs[command] = _run([os.path.join(BIN, argv[0]), *argv[1:]], timeout=180, NAMESRV_ADDR=namesrv)
    assert "DefaultCluster" in outputs["mqadmin clusterList"]
    sent = outputs["mqadmin sendMessage -t Orders -p 'hello' -k order-1 -c TagA"]
    assert "SEND_OK" in sent, sent
    assert "hello" in outputs["mqadmin consumeMessage -t Orders -g billing -c 10"]
    progress = json.loads(outputs["mqadmin consumerProgress -g billing --json"])
    assert progress, progress
    assert re.search(r"[0-9A-F]{32}", outputs["mqadmin queryMsgByKey -t Orders -k order-1"])
