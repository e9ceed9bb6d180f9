"""Suite-wide settings and the one cluster factory every test folder uses: real daemons as
subprocesses on 127.0.0.1 (tests/integration, tests/interop, tests/spark, tests/chaos)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import pytest
from hypothesis import settings

from tests.integration.daemons import Daemon, DaemonSet

# Wall-clock deadlines turn a busy 2-core machine into flaky failures; examples stay bounded
# by their count instead.
settings.register_profile("project", deadline=None)
settings.load_profile("project")


class Cluster(NamedTuple):
    """A NameServer and one broker registered with it; unpacks as ``ns, broker = cluster``."""

    namesrv: Daemon
    broker: Daemon

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr


@contextmanager
def running_daemons(root: str) -> Iterator[DaemonSet]:
    """The one cluster factory: daemons started under ``root`` are stopped on leaving, newest
    first, and each must have exited 0 on SIGTERM (a daemon that crashed fails the test)."""
    ds = DaemonSet(root)
    try:
        yield ds
    finally:
        codes = ds.stop_all()
    unclean = {name: code for name, code in codes.items() if code != 0}
    assert not unclean, f"daemons did not shut down cleanly: {unclean}"


@pytest.fixture
def daemons(tmp_path: str) -> Iterator[DaemonSet]:
    """Start daemons with ``daemons.namesrv(...)`` / ``daemons.broker(...)``; all are stopped after
    the test, each checked for a clean exit."""
    with running_daemons(os.path.join(str(tmp_path), "daemons")) as ds:
        yield ds


@pytest.fixture(scope="module")
def broker_options(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The settings of the module's ``cluster`` broker: the module's ``BROKER_OPTIONS`` (a tuple
    of ``key=value``). A folder's conftest or a module overrides this fixture when the settings
    need the test's files (an ACL file) or apply to a whole folder."""
    return tuple(getattr(request.module, "BROKER_OPTIONS", ()))


@pytest.fixture(scope="module")
def module_daemons(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonSet]:
    """The daemons of a module's ``cluster``; a module may start more in it (a dashboard), all
    stopped after its last test, each checked for a clean exit."""
    root = str(tmp_path_factory.mktemp(re.sub(r"\W", "_", request.module.__name__.rsplit(".", 1)[-1])))
    with running_daemons(root) as ds:
        yield ds


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, module_daemons: DaemonSet, broker_options: tuple[str, ...]) -> Cluster:
    """A NameServer and one broker shared by a module's tests, which keep apart by using their own
    topic and group names. The broker's settings are ``broker_options``; its name is the module's
    ``BROKER_NAME`` (default broker-a)."""
    ns = module_daemons.namesrv()
    return Cluster(ns, module_daemons.broker(ns.addr, *broker_options,
                                             name=getattr(request.module, "BROKER_NAME", "broker-a")))


@pytest.fixture(scope="module")
def module_broker(cluster: Cluster) -> Daemon:
    """The broker of the module's ``cluster``."""
    return cluster.broker
