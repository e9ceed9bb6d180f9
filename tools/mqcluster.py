"""``mqcluster up|down|status``: the docker-compose cluster as local processes.

The same topology (tools/cluster_topology.py) from the same ``conf/`` files as docker-compose.yml,
for machines without a container engine. ``up`` starts each daemon detached, with its store,
logs and console output under ``--home``, waits (bounded) for its boot line and then for both
brokers to be registered, and records the pids in ``<home>/cluster.json``; ``down`` stops them
by pid (SIGTERM, then SIGKILL after a grace period) and checks none is left; ``status`` reports.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import typer

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.admin import Admin
from rocketmq_py.tools.cluster_topology import (
    CONF_ROOT,
    GROUP_NAMES,
    NAMESRV,
    TOPOLOGIES,
    ServiceSpec,
    with_broker_groups,
)
from rocketmq_py.tools.mqadmin.common import CommandError, _session_credentials, emit, main_entry, one_line

app = typer.Typer(name="mqcluster", add_completion=False, no_args_is_help=True, help=__doc__)

DEFAULT_HOME = os.path.join(os.path.expanduser("~"), ".rocketmq-py", "cluster")
STATE_FILE = "cluster.json"
BOOT_TIMEOUT = 60.0
REGISTER_TIMEOUT = 30.0
STOP_GRACE = 15.0

HomeOption = typer.Option(DEFAULT_HOME, "--home", envvar="MQCLUSTER_HOME",
                          help="Where stores, logs, console output and cluster.json live")
# mqcluster's own calls to the NameServer signed as mqadmin's: --ak/--sk, else conf/tools.yml
# under $ROCKETMQ_HOME (docs/acl.md).
AccessKeyOption = typer.Option(None, "--ak", help="ACL accessKey to sign mqcluster's NameServer calls with")
SecretKeyOption = typer.Option(None, "--sk", help="ACL secretKey of --ak")


class ClusterError(Exception):
    """Why the cluster could not be started, stopped or inspected: the one line printed."""


@dataclass
class RunningService:
    name: str
    pid: int
    addr: str
    console: str
    module: str
    cpus: list[int] | None = None  # the CPUs it is pinned to (--cpu-affinity), None when not


def _state_path(home: str) -> str:
    return os.path.join(home, STATE_FILE)


def load_state(home: str) -> dict[str, RunningService]:
    try:
        with open(_state_path(home)) as f:
            raw = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ClusterError(f"unreadable {_state_path(home)}: {exc}") from None
    return {name: RunningService(**svc) for name, svc in raw.get("services", {}).items()}


def _save_state(home: str, services: dict[str, RunningService]) -> None:
    tmp = _state_path(home) + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"home": home, "services": {n: asdict(s) for n, s in services.items()}}, f, indent=2)
    os.replace(tmp, _state_path(home))


def pid_alive(pid: int, module: str | None = None) -> bool:
    """True while ``pid`` runs (a zombie is dead; with ``module``, a reused pid running something
    else is dead too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        if module is not None:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return module.encode() in f.read()
    except OSError:
        return False
    return True


def _boot_line(spec: ServiceSpec) -> str:
    return "The Name Server boot success" if spec.role == "namesrv" else "boot success"


def _addr_from_boot_line(line: str) -> str:
    if "address " in line:
        return line.rsplit("address ", 1)[1].strip()
    return line.split("[", 1)[1].split("]", 1)[0].split(", ", 1)[1]


def _wait_boot(spec: ServiceSpec, proc: subprocess.Popen[bytes], console: str) -> str:
    marker = _boot_line(spec)
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        with open(console, errors="replace") as f:
            for line in f:
                if marker in line:
                    return _addr_from_boot_line(line)
        if proc.poll() is not None:
            with open(console, errors="replace") as f:
                tail = [ln.strip() for ln in f.readlines()[-3:] if ln.strip()]
            in_use = re.search(r"(\S+:\d+) is in use", " ".join(tail[-1:]))
            if in_use:  # the daemon's own hint names its flag; here the flag is --free-ports
                raise ClusterError(f"{spec.name}: {in_use.group(1)} is in use: pass --free-ports, or stop what "
                                   f"holds it")
            raise ClusterError(f"{spec.name} exited with {proc.returncode} before booting: {' | '.join(tail)}")
        time.sleep(0.1)  # polling a log file for a boot line, bounded by the deadline
    raise ClusterError(f"{spec.name} did not boot within {BOOT_TIMEOUT:.0f}s (see {console})")


def _command(spec: ServiceSpec, home: str, conf_root: str, namesrv_addr: str | None, free_ports: bool,
             bind: str) -> list[str]:
    conf = os.path.join(conf_root, spec.conf)
    service_home = os.path.join(home, spec.name)
    cmd = [sys.executable, "-m", spec.module, "-c", conf]
    if spec.role == "namesrv":
        cmd += ["--home", service_home, "--bind-address", bind]
    else:
        assert namesrv_addr is not None
        cmd += ["-n", namesrv_addr, "--store", os.path.join(service_home, "store"),
                "-o", f"rocketmqHome={service_home}", "-o", f"bindAddress={bind}"]
    cmd += [arg for key, value in spec.overrides for arg in ("-o", f"{key}={value}")]
    if free_ports:
        cmd += ["--listen-port", "0"]
    return cmd


def cpu_plan(specs: tuple[ServiceSpec, ...], affinity: str) -> dict[str, list[int]]:
    """The CPU each broker is pinned to: ``auto`` spreads the broker groups over the CPUs this
    process may use, a group's master and slaves on one (the slave follows its master's load);
    a comma-separated list is used in turn instead; ``none`` pins nothing. The NameServer is never
    pinned: it is idle beside the brokers."""
    if affinity == "none":
        return {}
    if not hasattr(os, "sched_setaffinity"):
        raise ClusterError("--cpu-affinity needs os.sched_setaffinity (Linux)")
    allowed = sorted(os.sched_getaffinity(0))
    if affinity == "auto":
        cpus = allowed
    else:
        try:
            cpus = [int(c) for c in affinity.split(",") if c.strip()]
        except ValueError:
            raise ClusterError(f"--cpu-affinity {affinity!r}: auto, none or a list of CPUs like 0,1") from None
        outside = sorted(set(cpus) - set(allowed))
        if not cpus or outside:
            raise ClusterError(f"--cpu-affinity {affinity!r}: CPUs {outside or cpus} are not among this "
                               f"process's {allowed}")
    plan: dict[str, list[int]] = {}
    groups: dict[str, int] = {}
    for spec in specs:
        if spec.role == "broker":
            group = groups.setdefault(spec.props().get("brokerName", spec.name), len(groups))
            plan[spec.name] = [cpus[group % len(cpus)]]
    return plan


def _start(spec: ServiceSpec, home: str, conf_root: str, namesrv_addr: str | None, free_ports: bool,
           bind: str, cpus: list[int] | None = None) -> RunningService:
    service_home = os.path.join(home, spec.name)
    os.makedirs(service_home, exist_ok=True)
    console = os.path.join(service_home, "console.log")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ROCKETMQ_HOME": service_home}
    with open(console, "wb") as out:
        # A session of its own: the daemons outlive this command and ignore the terminal's ^C.
        proc = subprocess.Popen(_command(spec, home, conf_root, namesrv_addr, free_ports, bind),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=service_home, env=env, start_new_session=True,
                                # Pinned in the child before exec, so every thread it starts is.
                                preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus))
    try:
        addr = _wait_boot(spec, proc, console)
    except ClusterError:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        raise
    return RunningService(spec.name, proc.pid, addr, console, spec.module, cpus)


async def _registered_brokers(namesrv_addr: str, credentials: SessionCredentials | None = None) -> set[str]:
    async with Admin(namesrv_addr, timeout=3.0, instance_name=f"mqcluster-{os.getpid()}",
                     session_credentials=credentials) as admin:
        info = await admin.examine_broker_cluster_info()
    return {name for names in info.clusterAddrTable.values() for name in names}


def _wait_registered(namesrv_addr: str, names: set[str], credentials: SessionCredentials | None = None) -> None:
    deadline = time.monotonic() + REGISTER_TIMEOUT
    seen: set[str] = set()
    last_error = ""
    while time.monotonic() < deadline:
        try:
            seen = asyncio.run(_registered_brokers(namesrv_addr, credentials))
        except Exception as exc:
            seen = set()
            last_error = one_line(exc)
        if names <= seen:
            return
        time.sleep(0.2)  # polling the NameServer, bounded by the deadline
    because = f" (last answer: {last_error})" if last_error and not seen else ""
    raise ClusterError(f"brokers {sorted(names - seen)} did not register with {namesrv_addr} "
                       f"within {REGISTER_TIMEOUT:.0f}s{because}")


def stop_services(services: dict[str, RunningService], grace: float = STOP_GRACE) -> list[str]:
    """SIGTERM brokers first (they unregister from the NameServer), then the NameServer; SIGKILL
    whatever outlives ``grace``. Returns the names that had to be killed."""
    killed = []
    order = sorted(services.values(), key=lambda s: s.name == NAMESRV.name)
    for svc in order:
        if not pid_alive(svc.pid, svc.module):
            continue
        os.kill(svc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(svc.pid, svc.module) and time.monotonic() < deadline:
            time.sleep(0.05)  # waiting for a process we signalled to exit, bounded
        if pid_alive(svc.pid, svc.module):
            os.kill(svc.pid, signal.SIGKILL)
            killed.append(svc.name)
            deadline = time.monotonic() + 5
            while pid_alive(svc.pid, svc.module) and time.monotonic() < deadline:
                time.sleep(0.05)
    return killed


def _fail(command: str, exc: BaseException) -> None:
    typer.echo(f"mqcluster {command}: {one_line(exc)}", err=True)
    raise typer.Exit(1)


@app.command("up", help="Start the NameServer and the brokers from conf/ as local processes")
def up(
    home: str = HomeOption,
    conf_root: str = typer.Option(CONF_ROOT, "--conf-root",
                                   help="Directory holding conf/ (default: the one installed with the package)"),
    free_ports: bool = typer.Option(False, "--free-ports", help="Listen on free ports instead of conf/'s"),
    bind: str = typer.Option("127.0.0.1", "--bind", help="Address every daemon listens on"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    topology: str = typer.Option("2m-noslave", "--topology",
                                 help=f"Which cluster: {', '.join(TOPOLOGIES)} (conf/<name>/)"),
    brokers_per_host: int | None = typer.Option(
        None, "--brokers-per-host", min=1, max=len(GROUP_NAMES),
        help="Broker groups to run on this host (default: the topology's two); groups past conf/'s are made "
             "from broker-a's files, 10 ports apart (docs/deployment.md)"),
    cpu_affinity: str = typer.Option(
        "none", "--cpu-affinity",
        help="Pin each broker group to a CPU: auto (spread over the CPUs allowed), a list like 0,1, or none"),
    access_key: str | None = AccessKeyOption,
    secret_key: str | None = SecretKeyOption,
) -> None:
    home = os.path.abspath(home)
    try:
        credentials = _session_credentials(access_key, secret_key)
        if topology not in TOPOLOGIES:
            raise ClusterError(f"unknown topology {topology!r}: one of {', '.join(TOPOLOGIES)}")
        specs = TOPOLOGIES[topology]
        if brokers_per_host is not None:
            specs = with_broker_groups(specs, brokers_per_host)
        cpus = cpu_plan(specs, cpu_affinity)
        running = {n: s for n, s in load_state(home).items() if pid_alive(s.pid, s.module)}
        if running:
            raise ClusterError(f"already running under {home}: {', '.join(sorted(running))} (mqcluster down first)")
        os.makedirs(home, exist_ok=True)
        started: dict[str, RunningService] = {}
        try:
            ns = _start(NAMESRV, home, conf_root, None, free_ports, bind)
            started[ns.name] = ns
            _save_state(home, started)
            for spec in specs:
                if spec.role == "broker":
                    started[spec.name] = _start(spec, home, conf_root, ns.addr, free_ports, bind, cpus.get(spec.name))
                    _save_state(home, started)
            _wait_registered(ns.addr, {s.props(conf_root).get("brokerName", s.name) for s in specs
                                       if s.role == "broker"}, credentials)
        except BaseException:
            stop_services(started)
            _save_state(home, {})
            raise
    except (ClusterError, CommandError, OSError) as exc:
        _fail("up", exc)
        return
    if as_json:
        emit(True, {"home": home, "namesrvAddr": started[NAMESRV.name].addr,
                    "services": {n: asdict(s) for n, s in started.items()}})
        return
    for svc in started.values():
        pinned = f"  cpu {','.join(map(str, svc.cpus))}" if svc.cpus is not None else ""
        typer.echo(f"{svc.name:<10s} pid {svc.pid:<8d} {svc.addr}{pinned}")
    typer.echo(f"cluster up under {home}; export NAMESRV_ADDR={started[NAMESRV.name].addr}")


@app.command("down", help="Stop every daemon mqcluster up started under --home")
def down(home: str = HomeOption) -> None:
    home = os.path.abspath(home)
    try:
        services = load_state(home)
        if not services:
            typer.echo(f"nothing running under {home}")
            return
        killed = stop_services(services)
        left = [s.name for s in services.values() if pid_alive(s.pid, s.module)]
        if left:
            raise ClusterError(f"still running after SIGKILL: {', '.join(left)}")
        os.remove(_state_path(home))
    except (ClusterError, OSError) as exc:
        _fail("down", exc)
        return
    note = f" (killed after {STOP_GRACE:.0f}s: {', '.join(killed)})" if killed else ""
    typer.echo(f"stopped {', '.join(sorted(services))}{note}")


@app.command("status", help="Show which daemons run and which brokers the NameServer knows")
def status(home: str = HomeOption, as_json: bool = typer.Option(False, "--json", help="Print JSON"),
           access_key: str | None = AccessKeyOption, secret_key: str | None = SecretKeyOption) -> None:
    home = os.path.abspath(home)
    try:
        credentials = _session_credentials(access_key, secret_key)
        services = load_state(home)
        if not services:
            raise ClusterError(f"nothing running under {home}")
    except (ClusterError, CommandError) as exc:
        _fail("status", exc)
        return
    rows = [{"name": s.name, "pid": s.pid, "addr": s.addr, "alive": pid_alive(s.pid, s.module)}
            for s in services.values()]
    registered: list[str] = []
    ns = services.get(NAMESRV.name)
    if ns is not None and pid_alive(ns.pid, ns.module):
        try:
            registered = sorted(asyncio.run(_registered_brokers(ns.addr, credentials)))
        except Exception:
            registered = []
    emit(as_json, {"home": home, "services": rows, "registeredBrokers": registered},
         ("#Service", "#PID", "#Addr", "#Alive"), [(r["name"], r["pid"], r["addr"], r["alive"]) for r in rows])
    if not as_json:
        typer.echo(f"registered brokers: {', '.join(registered) or '-'}")
    # Whichever topology ``up`` started, at whichever --brokers-per-host: the NameServer and every
    # broker of one of them.
    expected_sets = [{s.name for s in with_broker_groups(specs, n)} for specs in TOPOLOGIES.values()
                     for n in range(1, len(GROUP_NAMES) + 1)]
    if not rows or not all(r["alive"] for r in rows) or {r["name"] for r in rows} not in expected_sets:
        raise typer.Exit(1)


def main() -> None:
    main_entry(app, "mqcluster")


if __name__ == "__main__":
    main()
