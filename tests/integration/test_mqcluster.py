"""mqcluster and docker-compose.yml describe one cluster, and ``mqcluster up`` gives a working one:
both brokers in clusterList, mqadmin's topic/send/consume/progress/query flow end to end, and
``mqcluster down`` leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator

import pytest
import yaml

from rocketmq_py.client import Admin, Message, NoRouteError, Producer
from rocketmq_py.tools.cluster_topology import GROUP_NAMES, TOPOLOGIES, TOPOLOGY, ServiceSpec, with_broker_groups
from rocketmq_py.tools.mqcluster import load_state, pid_alive, stop_services
from tests.integration.cli import run_cli
from tests.integration.daemons import ROOT
from tests.waiting import wait_for_async

COMPOSE = os.path.join(ROOT, "docker-compose.yml")
IMAGE_ROOT = "/opt/rocketmq-py/"


def _compose() -> dict:  # type: ignore[type-arg]
    with open(COMPOSE) as f:
        return yaml.safe_load(f)


def _flag(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def _overrides(command: list[str]) -> dict[str, str]:
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "-o")


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR:-default}``: the variable's value when set and non-empty, else the default."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: env.get(m.group(1)) or m.group(2), value)


def _active(services: dict, profiles: set[str]) -> dict:  # type: ignore[type-arg]
    """The services ``docker compose --profile ...`` starts: those without profiles, and those in one given."""
    return {name: svc for name, svc in services.items()
            if not svc.get("profiles") or profiles & set(svc["profiles"])}


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
def test_compose_file_matches_conf_and_mqcluster(topology: str) -> None:
    """``CLUSTER_TOPOLOGY=<name> docker compose [--profile slaves] up`` starts exactly what
    ``mqcluster up --topology <name>`` does, each service from the same conf file."""
    specs = TOPOLOGIES[topology]
    with_slaves = any(spec.props().get("brokerRole") == "SLAVE" for spec in specs if spec.role == "broker")
    env = {"CLUSTER_TOPOLOGY": topology}
    services = _active(_compose()["services"], {"slaves"} if with_slaves else set())
    assert set(services) == {spec.name for spec in specs}
    namesrv = next(s for s in specs if s.role == "namesrv")
    by_name = {spec.name: spec for spec in specs}
    for spec in specs:
        svc = services[spec.name]
        command = [_interpolate(arg, env) for arg in svc["command"]]
        assert command[0] == ("mqnamesrv" if spec.role == "namesrv" else "mqbroker")
        # The very conf file mqcluster starts this service from, at its path inside the image.
        assert _flag(command, "-c") == IMAGE_ROOT + spec.conf
        assert os.path.isfile(os.path.join(ROOT, spec.conf))
        # Published on the same numbers as inside: a broker advertises its listen port, so the
        # host must reach it there (and at the fast port, listen - 2). A slave runs in its
        # master's network namespace, whose service publishes the slave's ports too.
        publisher = services[svc["network_mode"].removeprefix("service:")] if "network_mode" in svc else svc
        published = {int(p.split(":")[0]) for p in publisher["ports"]}
        targets = {int(p.split(":")[1]) for p in publisher["ports"]}
        assert published == targets and set(spec.ports()) <= published
        assert svc["healthcheck"]["test"][0] == "CMD"
        assert svc["volumes"], f"{spec.name} keeps its data in a named volume"
        assert svc["volumes"][0].split(":")[0] in _compose()["volumes"]
        if spec.role == "broker":
            assert _flag(command, "-n") == f"namesrv:{namesrv.listen_port()}"
            overrides = _overrides(command)
            # The trap: brokers must advertise an address clients on the host can dial.
            assert overrides["brokerIP1"].startswith("127.0.0.1")
            assert svc["depends_on"]["namesrv"]["condition"] == "service_healthy"
            assert str(spec.listen_port()) in " ".join(svc["healthcheck"]["test"])
    brokers = [s for s in specs if s.role == "broker"]
    masters = [s for s in brokers if s.props().get("brokerRole", "ASYNC_MASTER") != "SLAVE"]
    assert len({s.props()["brokerName"] for s in brokers}) == 2
    assert {s.props()["brokerClusterName"] for s in brokers} == {"DefaultCluster"}
    assert {s.props()["brokerName"] for s in masters} == {s.name for s in masters}
    for spec in brokers:
        if spec not in masters:
            _check_slave(spec, by_name, services)


def _check_slave(spec: ServiceSpec, by_name: dict[str, ServiceSpec], services: dict) -> None:  # type: ignore[type-arg]
    """A slave of the compose file against its master: same brokerName, brokerId > 0, the
    master's network namespace (where 127.0.0.1 is the master, for its HA and remoting ports),
    no port of the two colliding in it."""
    svc = services[spec.name]
    master_name = svc["network_mode"].removeprefix("service:")
    master_spec, master_svc = by_name[master_name], services[master_name]
    props, master_props = spec.props(), master_spec.props()
    assert props["brokerRole"] == "SLAVE" and int(props["brokerId"]) > 0
    assert master_props.get("brokerRole", "ASYNC_MASTER") in {"ASYNC_MASTER", "SYNC_MASTER"}
    assert int(master_props.get("brokerId", "0")) == 0
    assert props["brokerName"] == master_props["brokerName"] == master_name
    assert props["brokerClusterName"] == master_props["brokerClusterName"]
    assert svc["depends_on"][master_name]["condition"] == "service_started"
    # The master's HA address (brokerIP2:listenPort+1) must be 127.0.0.1, reachable from the slave.
    assert _overrides(master_svc["command"])["brokerIP2"] == "127.0.0.1"
    assert "haMasterAddress" not in props, "the slave learns the HA address from the NameServer"
    # One namespace: listen, fast (listen - 2) and HA (listen + 1) ports of both, all distinct.
    ports = [p for s in (spec, master_spec) for p in (*s.ports(), s.listen_port() + 1)]
    assert len(set(ports)) == len(ports) == 6


def test_dockerfile_installs_the_project_and_exposes_every_port() -> None:
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read()
    assert "pip install ." in text and "COPY conf ./conf" in text
    exposed = {int(p) for line in text.splitlines() if line.startswith("EXPOSE") for p in line.split()[1:]}
    assert exposed == {p for specs in TOPOLOGIES.values() for spec in specs for p in spec.ports()}
    assert "WORKDIR /opt/rocketmq-py" in text  # where the compose commands find conf/


@pytest.fixture
def cluster_home(tmp_path: str) -> Iterator[str]:
    home = os.path.join(str(tmp_path), "cluster")
    try:
        yield home
    finally:
        # Whatever a failed test left running is stopped here, by pid.
        stop_services(load_state(home))


def test_mqcluster_up_admin_flow_and_down(cluster_home: str) -> None:
    up = run_cli("mqcluster", "up", "--home", cluster_home, "--free-ports", "--json").ok().json()
    ns = up["namesrvAddr"]
    assert set(up["services"]) == {"namesrv", "broker-a", "broker-b"}
    state = load_state(cluster_home)
    assert all(pid_alive(s.pid) for s in state.values())

    status = run_cli("mqcluster", "status", "--home", cluster_home, "--json").ok().json()
    assert status["registeredBrokers"] == ["broker-a", "broker-b"]
    again = run_cli("mqcluster", "up", "--home", cluster_home, "--free-ports")
    again.failed_with_one_line("already running")

    brokers = run_cli("mqadmin", "clusterList", "--json", "-n", ns).ok().json()
    assert sorted(r["brokerName"] for r in brokers) == ["broker-a", "broker-b"]
    assert {r["cluster"] for r in brokers} == {"DefaultCluster"}

    created = run_cli("mqadmin", "updateTopic", "-t", "ClusterTopic", "-c", "DefaultCluster", "-r", "2", "-w", "2",
                      "--json", "-n", ns).ok().json()
    assert len(created["brokers"]) == 2
    sent = [run_cli("mqadmin", "sendMessage", "-t", "ClusterTopic", "-p", f"hello-{i}", "-k", f"order-{i}",
                    "--json", "-n", ns).ok().json() for i in range(4)]
    consumed = run_cli("mqadmin", "consumeMessage", "-t", "ClusterTopic", "-g", "ClusterGroup", "--json",
                       "-n", ns).ok().json()
    assert sorted(m["body"] for m in consumed) == [f"hello-{i}" for i in range(4)]
    progress = run_cli("mqadmin", "consumerProgress", "-g", "ClusterGroup", "--json", "-n", ns).ok().json()
    assert progress["diffTotal"] == 0
    assert sum(q["consumerOffset"] for q in progress["queues"]) == 4
    found = run_cli("mqadmin", "queryMsgByKey", "-t", "ClusterTopic", "-k", "order-2", "--json", "-n", ns).ok().json()
    assert [m["msgId"] for m in found] == [sent[2]["msgId"]]

    down = run_cli("mqcluster", "down", "--home", cluster_home).ok()
    assert "stopped broker-a, broker-b, namesrv" in down.stdout and "killed" not in down.stdout
    assert not any(pid_alive(s.pid) for s in state.values())
    assert not _processes_under(cluster_home)
    run_cli("mqcluster", "status", "--home", cluster_home).failed_with_one_line("nothing running")
    assert "nothing running" in run_cli("mqcluster", "down", "--home", cluster_home).ok().stdout


def _processes_under(home: str) -> list[int]:
    """Pids of live processes whose command line mentions ``home`` (a leaked daemon would)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if home.encode() in f.read() and pid_alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_mqcluster_up_fails_cleanly_when_a_broker_cannot_start(cluster_home: str, tmp_path: str) -> None:
    """A broker that cannot start makes ``up`` fail with one line and stop what it started."""
    conf_root = os.path.join(str(tmp_path), "confroot")
    os.makedirs(os.path.join(conf_root, "conf", "2m-noslave"))
    for spec in TOPOLOGY:
        with open(os.path.join(ROOT, spec.conf)) as f:
            text = f.read()
        if spec.name == "broker-b":
            text += "\nbrokerPermission=not-a-number\n"
        with open(os.path.join(conf_root, spec.conf), "w") as f:
            f.write(text.replace("listenPort=9876", "listenPort=0"))
    result = run_cli("mqcluster", "up", "--home", cluster_home, "--free-ports", "--conf-root", conf_root)
    result.failed_with_one_line("broker-b")
    assert not _processes_under(cluster_home)
    assert load_state(cluster_home) == {}


ACL_ACCOUNTS = """
accounts:
  - accessKey: cluster-ak
    secretKey: cluster-secret
    admin: true
"""


def test_mqcluster_signs_its_nameserver_calls(cluster_home: str, tmp_path: str) -> None:
    """Against a NameServer with ACL that white-lists nothing (brokers signing with
    innerClientAuthenticationCredentials): ``up --ak/--sk`` sees both brokers register, ``status``
    sees them with the account from --ak/--sk or conf/tools.yml, and nothing without one."""
    conf_root = os.path.join(str(tmp_path), "confroot")
    os.makedirs(os.path.join(conf_root, "conf", "2m-noslave"))
    acl = os.path.join(str(tmp_path), "plain_acl.yml")
    with open(acl, "w") as f:
        f.write(ACL_ACCOUNTS)
    account = '{"accessKey":"cluster-ak","secretKey":"cluster-secret"}'
    for spec in TOPOLOGY:
        with open(os.path.join(ROOT, spec.conf)) as f:
            text = f.read()
        text += (f"\naclEnable=true\naclPlainFile={acl}\n" if spec.role == "namesrv"
                 else f"\ninnerClientAuthenticationCredentials={account}\n")
        with open(os.path.join(conf_root, spec.conf), "w") as f:
            f.write(text)
    bare = os.path.join(str(tmp_path), "bare-home")
    os.makedirs(bare)
    env = {"ROCKETMQ_HOME": bare}
    base = ("--home", cluster_home)
    run_cli("mqcluster", "up", *base, "--free-ports", "--conf-root", conf_root, "--ak", "cluster-ak",
            env=env).failed_with_one_line("--ak and --sk go together")
    run_cli("mqcluster", "up", *base, "--free-ports", "--conf-root", conf_root, "--ak", "cluster-ak",
            "--sk", "cluster-secret", "--json", env=env).ok()
    signed = run_cli("mqcluster", "status", *base, "--json", "--ak", "cluster-ak", "--sk", "cluster-secret",
                     env=env).ok().json()
    assert signed["registeredBrokers"] == ["broker-a", "broker-b"]
    assert run_cli("mqcluster", "status", *base, "--json", env=env).ok().json()["registeredBrokers"] == []
    tools_home = os.path.join(str(tmp_path), "tools-home")
    os.makedirs(os.path.join(tools_home, "conf"))
    with open(os.path.join(tools_home, "conf", "tools.yml"), "w") as f:
        f.write("accessKey: cluster-ak\nsecretKey: cluster-secret\n")
    from_file = run_cli("mqcluster", "status", *base, "--json", env={"ROCKETMQ_HOME": tools_home}).ok().json()
    assert from_file["registeredBrokers"] == ["broker-a", "broker-b"]
    run_cli("mqcluster", "down", *base).ok()


def test_broker_groups_on_one_host_never_share_a_port() -> None:
    """``--brokers-per-host N``: N broker groups named as conf/ names them, each listening 10 ports
    after the previous, so no listen, fast (listen - 2) or HA (listen + 1) port is taken twice;
    the first two are conf/'s own files unchanged."""
    for name, topology in TOPOLOGIES.items():
        for count in range(1, len(GROUP_NAMES) + 1):
            specs = with_broker_groups(topology, count)
            brokers = [s for s in specs if s.role == "broker"]
            assert len({s.props()["brokerName"] for s in brokers}) == count, (name, count)
            ports = [p for s in brokers for p in (*s.ports(), s.listen_port() + 1)]
            assert len(ports) == len(set(ports)), (name, count)
            assert len({s.name for s in specs}) == len(specs)
            assert len({s.props()["storePathRootDir"] for s in brokers}) == len(brokers)
        assert with_broker_groups(topology, 2) == topology
    with pytest.raises(ValueError, match="1 to 26"):
        with_broker_groups(TOPOLOGY, 27)


def _cpus_of(pid: int) -> set[frozenset[int]]:
    """The CPU sets of every thread of ``pid``."""
    return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}


async def _send_in_turn(ns: str, topic: str, bodies: list[str]) -> list[str]:
    """The broker each body was stored on, sent by one producer once the NameServer routes the
    topic to every broker (a broker registers a topic after answering its creation, as Java's
    does)."""
    async with Admin(ns) as admin:
        async def routed() -> bool:
            try:
                return len((await admin.examine_topic_route_info(topic)).queueDatas) == 3
            except NoRouteError:  # no broker has registered it yet
                return False
        assert await wait_for_async(routed, 10), "the topic was never routed to all three brokers"
    producer = Producer("PerCoreProducer", ns)
    await producer.start()
    try:
        return [(await producer.send(Message(topic, body.encode()))).message_queue.broker_name for body in bodies]
    finally:
        await producer.shutdown()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_mqcluster_runs_several_brokers_per_host_pinned_to_cores(cluster_home: str) -> None:
    """``up --brokers-per-host 3 --cpu-affinity auto``: three brokers, each pinned (every thread of
    it) to one of the CPUs allowed, in turn; all registered; a topic created on the cluster has
    queues on each, and messages sent through the NameServer land on more than one and are all
    consumed."""
    run_cli("mqcluster", "up", "--home", cluster_home, "--free-ports", "--cpu-affinity", "0,99999"
            ).failed_with_one_line("not among this process's")
    up = run_cli("mqcluster", "up", "--home", cluster_home, "--free-ports", "--brokers-per-host", "3",
                 "--cpu-affinity", "auto", "--json").ok().json()
    ns = up["namesrvAddr"]
    assert set(up["services"]) == {"namesrv", "broker-a", "broker-b", "broker-c"}
    allowed = sorted(os.sched_getaffinity(0))
    for i, name in enumerate(("broker-a", "broker-b", "broker-c")):
        svc = up["services"][name]
        assert svc["cpus"] == [allowed[i % len(allowed)]]
        assert _cpus_of(svc["pid"]) == {frozenset(svc["cpus"])}, name
    assert up["services"]["namesrv"]["cpus"] is None
    status = run_cli("mqcluster", "status", "--home", cluster_home, "--json").ok().json()
    assert status["registeredBrokers"] == ["broker-a", "broker-b", "broker-c"]

    created = run_cli("mqadmin", "updateTopic", "-t", "PerCoreTopic", "-c", "DefaultCluster", "-r", "2", "-w", "2",
                      "--json", "-n", ns).ok().json()
    assert len(created["brokers"]) == 3
    # One producer: its sends take the route's queues in turn, so six of them reach every broker.
    # (Six ``mqadmin sendMessage`` runs each start at a random queue: 1 in 243 all on one broker.)
    sent = asyncio.run(_send_in_turn(ns, "PerCoreTopic", [f"core-{i}" for i in range(6)]))
    assert sorted(sent) == ["broker-a", "broker-a", "broker-b", "broker-b", "broker-c", "broker-c"], sent
    consumed = run_cli("mqadmin", "consumeMessage", "-t", "PerCoreTopic", "-g", "PerCoreGroup", "--json",
                       "-n", ns).ok().json()
    assert sorted(m["body"] for m in consumed) == [f"core-{i}" for i in range(6)]
    down = run_cli("mqcluster", "down", "--home", cluster_home).ok()
    assert "stopped broker-a, broker-b, broker-c, namesrv" in down.stdout
    assert not _processes_under(cluster_home)
