"""A refused request is visible in the daemon's log: one WARN line per code and client address."""

from __future__ import annotations

import os

from rocketmq_py.remoting import RemotingClient
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_until

# consumeFromWhere 9: no ConsumeFromWhere has that ordinal, so the heartbeat cannot be read.
BAD_HEARTBEAT = b'{"clientID":"c1","consumerDataSet":[{"groupName":"g","consumeFromWhere":9}]}'


def _lines(path: str, needle: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line for line in f if needle in line]


async def test_a_refused_heartbeat_is_logged_once_with_address_code_and_reason(daemons: DaemonSet,
                                                                              client: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    log = os.path.join(broker.home, "logs", "rocketmqlogs", "broker.log")
    for _ in range(3):
        answer = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=BAD_HEARTBEAT),
                                     5.0)
        assert answer.code == ResponseCode.SYSTEM_ERROR and "ordinal 9" in (answer.remark or "")
    # a request the broker serves afterwards proves the three were handled (and logged) before it
    ok = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=b'{"clientID":"c1"}'),
                             5.0)
    assert ok.code == ResponseCode.SUCCESS
    assert await wait_until(lambda: bool(_lines(log, "refused request code 34")), 10)
    (line,) = _lines(log, "refused request code 34")
    assert "WARN" in line and "from 127.0.0.1:" in line and "bad heartbeat body" in line and "ordinal 9" in line
