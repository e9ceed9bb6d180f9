"""docs/admin-codes.md against the processor tables: each code it calls served (or refused with a
reason) has a row at the daemon it is listed under, and each code listed as not supported or not
yet has none, so the page cannot drift from what the daemons answer."""

from __future__ import annotations

import os
import re

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import BrokerController
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.namesrv.controller import NamesrvController
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "admin-codes.md")


def _rows(section: str) -> list[tuple[list[int], list[str], str]]:
    """(codes, names, status) of each table row under ``## section``."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not re.fullmatch(r"[\d, ]+", cells[0]):
            continue
        codes = [int(c) for c in cells[0].split(",")]
        names = [n.strip() for n in cells[1].split(",")]
        rows.append((codes, names, cells[3]))
    return rows


def _check(section: str, registered: set[int]) -> int:
    checked = 0
    for codes, names, status in _rows(section):
        assert len(codes) == len(names), (codes, names)
        for code, name in zip(codes, names, strict=True):
            assert RequestCode[name] == code, f"{name} is {RequestCode[name].value}, not {code}"
            answered = status.startswith(("served", "refused"))
            assert status.startswith(("served", "refused", "not yet", "not supported as in Java")), status
            assert (code in registered) == answered, f"{name} ({code}) is listed as {status!r}"
            checked += 1
    return checked


def test_broker_codes_match_the_page(tmp_path: str) -> None:
    broker = BrokerController(BrokerConfig(brokerName="broker-a"), NettyServerConfig(listenPort=0),
                              MessageStoreConfig(storePathRootDir=str(tmp_path)))
    table = broker.remoting_server.processors
    registered = {int(c) for c in RequestCode if table.processor_for(int(c)) is not None}
    assert _check("Broker", registered) == 59


def test_namesrv_codes_match_the_page(tmp_path: str) -> None:
    namesrv = NamesrvController(NamesrvConfig(kvConfigPath=os.path.join(str(tmp_path), "kv.json")),
                                NettyServerConfig(listenPort=0))
    table = namesrv.remoting_server.processors
    registered = {int(c) for c in RequestCode if table.processor_for(int(c)) is not None}
    assert _check("NameServer", registered) == 17
