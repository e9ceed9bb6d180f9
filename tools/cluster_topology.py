"""The local cluster's topology: one NameServer and two masters of one cluster, each started from
its own ``conf/`` file (or, by name, two masters with a slave each: 2m-2s-sync, 2m-2s-async).
``mqcluster`` starts exactly these as processes and docker-compose.yml
declares exactly these as services (``CLUSTER_TOPOLOGY``, and the ``slaves`` profile for the
2m-2s ones); tests/integration/test_mqcluster.py checks the two agree.
"""

from __future__ import annotations

import os
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

    def props(self, root: str = CONF_ROOT) -> dict[str, str]:
        return read_properties_file(os.path.join(root, self.conf))

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
