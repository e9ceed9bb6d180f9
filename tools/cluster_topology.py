"""The local cluster's topology: one NameServer and two masters of one cluster, each started from
its own ``conf/`` file. ``mqcluster`` starts exactly these as processes and docker-compose.yml
declares exactly these as services; tests/integration/test_mqcluster.py checks the two agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from rocketmq_py.remoting.properties import read_properties_file

# The checkout this package lives in: conf/ beside tools/.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    role: Literal["namesrv", "broker"]
    conf: str  # relative to the repo root, the same path the compose file mounts

    def props(self, root: str = REPO_ROOT) -> dict[str, str]:
        return read_properties_file(os.path.join(root, self.conf))

    def listen_port(self, root: str = REPO_ROOT) -> int:
        default = "9876" if self.role == "namesrv" else "10911"
        return int(self.props(root).get("listenPort", default))

    def ports(self, root: str = REPO_ROOT) -> list[int]:
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
