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
