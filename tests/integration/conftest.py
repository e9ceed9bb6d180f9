"""Integration fixtures beside the shared cluster factory of tests/conftest.py: a lone NameServer,
a refused address, a raw remoting client."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from rocketmq_py.remoting import RemotingClient
from tests.integration.daemons import Daemon, DaemonSet


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
