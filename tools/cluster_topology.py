"""The local cluster's topology: one NameServer and two masters of one cluster, each started from
its own ``conf/`` file (or, by name, two masters with a slave each: 2m-2s-sync, 2m-2s-async).
``mqcluster`` starts exactly these as processes and docker-compose.yml
declares exactly these as services (``CLUSTER_TOPOLOGY``, and the ``slaves`` profile for the
2m-2s ones); tests/integration/test_mqcluster.py checks the two agree.

``with_broker_groups`` sizes a topology to N broker groups on one host (``mqcluster up
--brokers-per-host N``): one broker process runs one event loop on one core, so a host's cores are
used by running several (docs/deployment.md).
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from typing import Literal

from rocketmq_py.common.properties import read_properties_file
from rocketmq_py.conf import CONF_DIR

# The directory holding conf/: the checkout under an editable install, the installed package
# (site-packages/rocketmq_py) under a wheel's, so the same relative paths work for both.
CONF_ROOT = str(CONF_DIR.parent)


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    role: Literal["namesrv", "broker"]
    conf: str  # relative to CONF_ROOT, the same path the compose file mounts
    # Keys over the conf file's (a broker group made from another's file): passed as -o.
    overrides: tuple[tuple[str, str], ...] = ()

    def props(self, root: str = CONF_ROOT) -> dict[str, str]:
        return read_properties_file(os.path.join(root, self.conf)) | dict(self.overrides)

    def listen_port(self, root: str = CONF_ROOT) -> int:
        default = "9876" if self.role == "namesrv" else "10911"
        return int(self.props(root).get("listenPort", default))

    def ports(self, root: str = CONF_ROOT) -> list[int]:
        """Ports a client must reach: a broker's listen port and its fast port (listen - 2), as
        RocketMQ clients dial both; the NameServer's one port."""
        port = self.listen_port(root)
        return [port] if self.role == "namesrv" else [port, port - 2]

    @property
    def module(self) -> str:
        return "rocketmq_py.namesrv.startup" if self.role == "namesrv" else "rocketmq_py.broker.startup"


NAMESRV = ServiceSpec("namesrv", "namesrv", "conf/namesrv.conf")
TOPOLOGY: tuple[ServiceSpec, ...] = (
    NAMESRV,
    ServiceSpec("broker-a", "broker", "conf/2m-noslave/broker-a.properties"),
    ServiceSpec("broker-b", "broker", "conf/2m-noslave/broker-b.properties"),
)


def _master_slave(kind: str) -> tuple[ServiceSpec, ...]:
    """RocketMQ's 2m-2s-sync / 2m-2s-async: each master followed by its slave (brokerId 1)."""
    return (NAMESRV, *(ServiceSpec(f"broker-{b}{s}", "broker", f"conf/{kind}/broker-{b}{s}.properties")
                       for b in "ab" for s in ("", "-s")))


# ``mqcluster up --topology NAME``; the default, TOPOLOGY, is docker-compose.yml's default too.
TOPOLOGIES: dict[str, tuple[ServiceSpec, ...]] = {
    "2m-noslave": TOPOLOGY,
    "2m-2s-sync": _master_slave("2m-2s-sync"),
    "2m-2s-async": _master_slave("2m-2s-async"),
}


# Broker groups are named broker-a, broker-b, ... as conf/ names them, and listen 10 ports apart
# from broker-a's (10911, 10921, ...): each keeps its fast port (listen - 2), HA port (listen + 1)
# and its slave's (listen + 4, + 5, + 2) inside its own ten, so no two clash.
GROUP_NAMES = tuple(f"broker-{letter}" for letter in string.ascii_lowercase)
PORT_STEP = 10


def broker_groups(topology: tuple[ServiceSpec, ...]) -> list[list[ServiceSpec]]:
    """The topology's brokers by broker group (a master and its slaves), in order."""
    groups: dict[str, list[ServiceSpec]] = {}
    for spec in topology:
        if spec.role == "broker":
            groups.setdefault(spec.props().get("brokerName", spec.name), []).append(spec)
    return list(groups.values())


def with_broker_groups(topology: tuple[ServiceSpec, ...], count: int) -> tuple[ServiceSpec, ...]:
    """The topology with ``count`` broker groups on this host: its own groups first, as conf/
    declares them, then groups made from its first one's files with the next name, ports
    ``PORT_STEP`` further on per group, and their own store directories."""
    if not 1 <= count <= len(GROUP_NAMES):
        raise ValueError(f"brokers per host must be 1 to {len(GROUP_NAMES)}, not {count}")
    groups = broker_groups(topology)
    template = groups[0]
    base = template[0].props().get("brokerName", template[0].name)
    specs = [spec for spec in topology if spec.role == "namesrv"]
    for i in range(count):
        if i < len(groups):
            specs += groups[i]
            continue
        name = GROUP_NAMES[i]
        for spec in template:
            props = spec.props()
            store = props.get("storePathRootDir", f"store-{spec.name}").replace(base, name)
            specs.append(ServiceSpec(spec.name.replace(base, name, 1), "broker", spec.conf, (
                ("brokerName", name), ("listenPort", str(spec.listen_port() + PORT_STEP * i)),
                ("storePathRootDir", store))))
    return tuple(specs)
