"""The cluster fixture every integration test uses: real daemons as subprocesses on 127.0.0.1."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from rocketmq_py.remoting import RemotingClient
from tests.integration.daemons import Daemon, DaemonSet


@pytest.fixture
def daemons(tmp_path: str) -> Iterator[DaemonSet]:
    """Start daemons with ``daemons.namesrv(...)`` / ``daemons.broker(...)``; all are stopped after
    the test, and each must have exited 0 on SIGTERM (a daemon that crashed fails the test)."""
    ds = DaemonSet(os.path.join(str(tmp_path), "daemons"))
    try:
        yield ds
    finally:
        codes = ds.stop_all()
    unclean = {name: code for name, code in codes.items() if code != 0}
    assert not unclean, f"daemons did not shut down cleanly: {unclean}"


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A NameServer and one broker shared by a module's tests, which keep apart by using their
    own topic and group names; both must exit 0 on SIGTERM after the module."""
    ds = DaemonSet(str(tmp_path_factory.mktemp("module")))
    try:
        yield ds.broker(ds.namesrv().addr)
    finally:
        codes = ds.stop_all()
    unclean = {name: code for name, code in codes.items() if code != 0}
    assert not unclean, f"daemons did not shut down cleanly: {unclean}"


@pytest.fixture
def namesrv(daemons: DaemonSet) -> Daemon:
    """One NameServer with RocketMQ's defaults."""
    return daemons.namesrv()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """A raw remoting client, closed after the test."""
    c = RemotingClient()
    yield c
    await c.close()
