"""Running out of file descriptors never crashes the broker (docs/store-disk-full.md).

The broker raises its soft open-file limit to the hard one at start and logs both. Then the test
lowers the running broker's limit (prlimit) to a few descriptors above what it holds, opens
connections until it runs out, and checks: new connections are refused with a WARN line, a send
that needs a new store file is refused with a clear code, the broker stays up, and once the
connections are closed it serves new clients and sends again.
"""

from __future__ import annotations

import os
import re
import socket
import sys

import pytest

from rocketmq_py.remoting import RemotingClient, RequestCode, ResponseCode
from tests.integration.broker_client import call, send_request
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_for_async, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prlimit and /proc/<pid>/fd are Linux's")

_LIMITS = re.compile(r"open-file limit \(RLIMIT_NOFILE\): soft (\S+), hard (\S+)")
CONNECTION_LIMIT = 500  # bounds the loop that exhausts the broker's descriptors


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_out_of_descriptors_refuses_and_recovers(daemons: DaemonSet) -> None:
    import resource

    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    logged = [m for line in broker.lines if (m := _LIMITS.search(line))]
    assert logged, "the broker did not log its open-file limits"
    expected = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    assert logged[0].group(1) == logged[0].group(2) == expected, logged[0].group(0)

    client = RemotingClient()
    held: list[socket.socket] = []
    try:
        for topic in ("Before", "After"):
            created = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                                 {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1",
                                  "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"})
            assert created.code == ResponseCode.SUCCESS, created.remark
        assert (await client.invoke(broker.addr, send_request("Before", b"first", queue_id=0), 5)).code == \
            ResponseCode.SUCCESS
        # A few descriptors of room, then connections until the broker has none left.
        pid = broker.proc.pid
        limit = _open_fds(pid) + 8
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
        host, port = broker.addr.rsplit(":", 1)
        refused = False
        for _ in range(CONNECTION_LIMIT):
            s = socket.create_connection((host, int(port)), timeout=5)
            held.append(s)
            s.settimeout(0.5)
            try:
                closed = s.recv(1) == b""  # a refused connection is accepted and closed at once
            except TimeoutError:
                closed = False
            if closed:
                refused = True
                break
        assert refused, f"{len(held)} connections and none refused"
        assert await wait_until(lambda: any("too many open files" in line and "refused the connection" in line
                                            for line in broker.lines), 10), "no WARN line for the refusal"
        assert broker.alive()
        # The existing connection still works; a send needing a new ConsumeQueue file is refused.
        no_file = await client.invoke(broker.addr, send_request("After", b"no descriptor", queue_id=0), 5)
        assert no_file.code == ResponseCode.SYSTEM_ERROR and "create mapped file failed" in (no_file.remark or ""), \
            (no_file.code, no_file.remark)
        ok = await client.invoke(broker.addr, send_request("Before", b"second", queue_id=0), 5)
        assert ok.code == ResponseCode.SUCCESS and ok.ext_fields["queueOffset"] == "1", ok.remark
        for s in held:
            s.close()
        held.clear()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        fresh = RemotingClient()
        try:
            async def sent() -> bool:
                r = await fresh.invoke(broker.addr, send_request("After", b"again", queue_id=0), 5)
                return r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"

            assert await wait_for_async(sent, 10), "a new client could not send after descriptors were freed"
        finally:
            await fresh.close()
        assert broker.alive()
    finally:
        for s in held:
            s.close()
        await client.close()
