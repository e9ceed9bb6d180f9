"""Official clients against real daemons: one NameServer and one Broker per test module, from the
shared ``cluster`` fixture (tests/conftest.py).

Each test uses fresh topic and group names (``names``), so tests of a module share the daemons
without seeing each other's messages. The retry and delay levels are shortened
(``messageDelayLevel``) so RECONSUME_LATER and delay tests take seconds, not minutes; property
filters are on for the SQL92 consumers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import Cluster
from tests.interop.cpp_process import CppClients, require_cpp_client

# Level 1 is 1 s, level 2 is 2 s (the delay test's level), every later level 1 s: a message a
# consumer sends back (level 3 + reconsume times) is redelivered a second later.
DELAY_LEVELS = "1s 2s " + " ".join(["1s"] * 16)


@pytest.fixture(scope="module")
def broker_options() -> tuple[str, ...]:
    """Every interop module's broker: short delay levels and property filters."""
    return (f"messageDelayLevel={DELAY_LEVELS}", "enablePropertyFilter=true")


@dataclass
class Names:
    topic: str
    group: str
    producer_group: str


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    """Topic and group names no other test uses."""
    suffix = f"{request.node.name[:40]}_{uuid.uuid4().hex[:8]}".replace("[", "_").replace("]", "_")
    return Names(f"T_{suffix}", f"CG_{suffix}", f"PG_{suffix}")


@pytest.fixture
def client_home(tmp_path: str) -> str:
    """HOME for the foreign clients: the C++ client writes its logs (~/logs) and broadcasting
    offsets (~/.rocketmq_offsets) there."""
    home = os.path.join(str(tmp_path), "client-home")
    os.makedirs(home, exist_ok=True)
    return home


@pytest.fixture
def cpp(cluster: Cluster, client_home: str) -> Iterator[CppClients]:
    """The C++ client's scenarios pointed at the module's NameServer; any still running at the
    end of the test is killed. Skips where librocketmq cannot load."""
    require_cpp_client()
    clients = CppClients(cluster.namesrv_addr, client_home)
    try:
        yield clients
    finally:
        clients.close()
