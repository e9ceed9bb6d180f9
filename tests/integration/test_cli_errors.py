"""A first run's failures, from every CLI, as one line naming what to pass instead (issue 22).

Ports are held by a socket of the test's own (bound on 127.0.0.1, port 0), stores by a running
mqstandalone; nothing here depends on 9876 or 10911 being free or taken on the machine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from rocketmq_py.tools.cluster_topology import TOPOLOGY
from tests.integration.cli import run_cli
from tests.integration.daemons import ROOT, Daemon, _spawn

STANDALONE_PORT_HINT = "is in use: pass --port/--broker-port, or 0 for free ports"
DAEMON_PORT_HINT = "is in use: pass -l/--listen-port, or 0 for a free port"
METRICS_HINT = "0 for a free port, -1 for none"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another process (this test) listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def standalone(tmp_path: str) -> Iterator[Daemon]:
    home = os.path.join(str(tmp_path), "standalone")
    os.makedirs(home)
    d = _spawn("mqstandalone", ["rocketmq_py.standalone", "--port", "0", "--broker-port", "0", "--home", home],
               home, "boot success. serializeType=JSON and name server")
    try:
        yield d
    finally:
        assert d.stop() == 0, "\n".join(d.lines[-20:])


@pytest.mark.parametrize("flag", ["--port", "--broker-port"])
def test_mqstandalone_port_in_use_is_one_line_with_the_flags(held_port: int, flag: str, tmp_path: str) -> None:
    args = {"--port": "0", "--broker-port": "0", flag: str(held_port)}
    result = run_cli("mqstandalone", "--demo-only", "--home", str(tmp_path), *[x for kv in args.items() for x in kv])
    line = result.failed_with_one_line(f"127.0.0.1:{held_port} {STANDALONE_PORT_HINT}")
    assert line.startswith("mqstandalone: ") and result.returncode == 1


def test_mqstandalone_metrics_port_in_use_names_metrics_port(held_port: int, tmp_path: str) -> None:
    result = run_cli("mqstandalone", "--demo-only", "--home", str(tmp_path), "--port", "0", "--broker-port", "0",
                     "--metrics-port", str(held_port))
    result.failed_with_one_line(f"127.0.0.1:{held_port} is in use", "--metrics-port", METRICS_HINT)


def test_mqnamesrv_and_mqbroker_port_in_use_is_one_line(held_port: int, tmp_path: str) -> None:
    ns = run_cli("mqnamesrv", "--home", str(tmp_path), "-l", str(held_port), "--bind-address", "127.0.0.1")
    assert ns.failed_with_one_line(DAEMON_PORT_HINT).startswith(f"mqnamesrv: 127.0.0.1:{held_port} is in use")
    broker = run_cli("mqbroker", "-n", "127.0.0.1:1", "-l", str(held_port), "--store", os.path.join(str(tmp_path), "s"),
                     "-o", "bindAddress=127.0.0.1", "-o", f"rocketmqHome={tmp_path}")
    assert broker.failed_with_one_line(DAEMON_PORT_HINT).startswith(f"mqbroker: 127.0.0.1:{held_port} is in use")
    metrics = run_cli("mqnamesrv", "--home", str(tmp_path), "-l", "0", "--bind-address", "127.0.0.1",
                      "-o", f"metricsPort={held_port}")
    metrics.failed_with_one_line(f"127.0.0.1:{held_port} is in use", "metricsPort", METRICS_HINT)


def test_a_locked_store_is_one_line_with_the_way_out(standalone: Daemon) -> None:
    second = run_cli("mqstandalone", "--demo-only", "--home", standalone.home, "--port", "0", "--broker-port", "0")
    second.failed_with_one_line("Lock failed, MQ already started", "pass --home DIR")
    broker = run_cli("mqbroker", "-n", "127.0.0.1:1", "-l", "0", "--store", os.path.join(standalone.home, "store"),
                     "-o", "bindAddress=127.0.0.1", "-o", f"rocketmqHome={standalone.home}")
    broker.failed_with_one_line("Lock failed, MQ already started", "pass --store DIR")
    assert standalone.alive()  # the refused second store took nothing from the running one


@pytest.mark.parametrize(("tool", "args", "fragments"), [
    ("mqnamesrv", ["-o", "listenPort=abc", "-p"], ["listenPort", "mqnamesrv -p prints every key"]),
    ("mqnamesrv", ["-c", "/nonexistent/namesrv.conf", "-p"], ["cannot read config file", "example files in"]),
    ("mqbroker", ["-o", "brokerPermission=x", "-p"], ["brokerPermission", "mqbroker -p prints every key"]),
    ("mqbroker", ["--listen-port", "abc"], ["--listen-port"]),
    ("mqstandalone", ["--port", "abc"], ["--port"]),
    ("mqstandalone", ["--broker-port", "70000"], ["--broker-port", "65535"]),
    ("mqstandalone", ["--no-such-flag"], ["--no-such-flag"]),
    ("mqstandalone", ["-o", "brokerNmae=x"], ["unknown config keys: brokerNmae", "mqbroker -p"]),
    ("mqstandalone", ["-o", "flushDiskType=SOMETIMES"], ["flushDiskType", "mqbroker -p"]),
])
def test_bad_config_and_usage_errors_are_one_line(tool: str, args: list[str], fragments: list[str]) -> None:
    result = run_cli(tool, *args)
    assert result.failed_with_one_line(*fragments).startswith(f"{tool}: ")
    assert result.returncode == 2


def test_the_hint_names_the_shipped_conf_dir_that_exists() -> None:
    line = run_cli("mqbroker", "-c", "/nonexistent/broker.conf").failed_with_one_line("example files in ")
    conf_dir = line.rsplit("example files in ", 1)[1].rstrip(")")
    assert os.path.isfile(os.path.join(conf_dir, "broker.conf"))


def test_mqcluster_up_with_a_conf_port_in_use_points_at_free_ports(held_port: int, tmp_path: str) -> None:
    conf_root = os.path.join(str(tmp_path), "confroot")
    os.makedirs(os.path.join(conf_root, "conf", "2m-noslave"))
    for spec in TOPOLOGY:
        with open(os.path.join(ROOT, spec.conf)) as f:
            text = f.read()
        with open(os.path.join(conf_root, spec.conf), "w") as f:
            f.write(text + f"\nlistenPort={held_port}\n" if spec.role == "namesrv" else text)
    home = os.path.join(str(tmp_path), "cluster")
    result = run_cli("mqcluster", "up", "--home", home, "--conf-root", conf_root)
    result.failed_with_one_line(f"namesrv: 127.0.0.1:{held_port} is in use: pass --free-ports")


@pytest.mark.parametrize(("tool", "args"), [
    ("mqadmin", ["clusterList"]),
    ("mqadmin", ["topicRoute", "-t", "T"]),
    ("mqbench", ["produce", "-t", "T", "-d", "1"]),
])
def test_no_namesrv_listening_is_one_line_naming_n(tool: str, args: list[str]) -> None:
    with socket.socket() as s:  # bound then closed: a port nothing listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    result = run_cli(tool, *args, "-n", f"127.0.0.1:{free}", timeout=60)
    line = result.failed_with_one_line(f"127.0.0.1:{free}", "pass -n host:port or set NAMESRV_ADDR")
    assert "autoCreateTopicEnable" not in line, "no NameServer was reached, so nothing is known of TBW102"
