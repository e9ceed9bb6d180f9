"""The cluster fixture every integration test uses: real daemons as subprocesses on 127.0.0.1."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest

from rocketmq_py.remoting import RemotingClient
from tests.integration.daemons import Daemon, DaemonSet


@contextmanager
def running_daemons(root: str) -> Iterator[DaemonSet]:
    """The one cluster factory: daemons started under ``root`` are stopped on leaving, newest
    first, and each must have exited 0 on SIGTERM (a daemon that crashed fails the test).
    Every fixture that starts daemons, here and in tests/interop and tests/spark, goes through it."""
    ds = DaemonSet(root)
    try:
        yield ds
    finally:
        codes = ds.stop_all()
    unclean = {name: code for name, code in codes.items() if code != 0}
    assert not unclean, f"daemons did not shut down cleanly: {unclean}"


@contextmanager
def running_cluster(root: str, *broker_options: str, broker_name: str = "broker-a") -> Iterator[tuple[Daemon, Daemon]]:
    """A NameServer and one broker registered with it (``broker_options`` as ``-o key=value``)."""
    with running_daemons(root) as ds:
        ns = ds.namesrv()
        yield ns, ds.broker(ns.addr, *broker_options, name=broker_name)


@pytest.fixture
def daemons(tmp_path: str) -> Iterator[DaemonSet]:
    """Start daemons with ``daemons.namesrv(...)`` / ``daemons.broker(...)``; all are stopped after
    the test, each checked for a clean exit."""
    with running_daemons(os.path.join(str(tmp_path), "daemons")) as ds:
        yield ds


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Daemon]]:
    """A NameServer and one broker shared by a module's tests, which keep apart by using their own
    topic and group names. A module sets its broker's settings as ``BROKER_OPTIONS`` (a tuple of
    ``key=value``) and its name as ``BROKER_NAME`` (default broker-a)."""
    module = request.module
    root = str(tmp_path_factory.mktemp(re.sub(r"\W", "_", module.__name__.rsplit(".", 1)[-1])))
    with running_cluster(root, *getattr(module, "BROKER_OPTIONS", ()),
                         broker_name=getattr(module, "BROKER_NAME", "broker-a")) as pair:
        yield pair


@pytest.fixture(scope="module")
def module_broker(cluster: tuple[Daemon, Daemon]) -> Daemon:
    """The broker of the module's ``cluster``."""
    return cluster[1]


@pytest.fixture
def namesrv(daemons: DaemonSet) -> Daemon:
    """One NameServer with RocketMQ's defaults."""
    return daemons.namesrv()


@pytest.fixture
def refused_addr() -> Iterator[str]:
    """``127.0.0.1:<port>`` where a connection is refused at once: the port is bound by this
    fixture but never listened on, so no daemon of this machine can be there during the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """A raw remoting client, closed after the test."""
    c = RemotingClient()
    yield c
    await c.close()
