"""The official C++ client (librocketmq 1.2.3) against a broker with aclEnable=true: with its
account's AK/SK it sends and consumes; with a wrong secret or with none its sends are refused
and nothing is stored."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.integration.conftest import running_cluster
from tests.interop.conftest import Cluster, Names
from tests.interop.cpp_process import CppClients, require_cpp_client
from tests.waiting import wait_for_async

QUEUES = 4
ADMIN = SessionCredentials("admin-ak", "admin-secret")


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("acl-interop")
    acl = os.path.join(str(root), "plain_acl.yml")
    with open(acl, "w") as f:
        f.write("accounts:\n"
                "  - {accessKey: admin-ak, secretKey: admin-secret, admin: true}\n"
                "  - {accessKey: cpp-client, secretKey: cpp-secret, defaultTopicPerm: PUB|SUB,\n"
                "     defaultGroupPerm: SUB}\n")
    with running_cluster(str(root), "aclEnable=true", f"aclPlainFile={acl}") as (ns, broker):
        yield Cluster(ns, broker)


@pytest.fixture
def cpp(acl_cluster: Cluster, client_home: str) -> Iterator[CppClients]:
    require_cpp_client()
    clients = CppClients(acl_cluster.namesrv_addr, client_home)
    try:
        yield clients
    finally:
        clients.close()


def _stored(cluster: Cluster, topic: str) -> list[MessageExt]:
    async def read() -> list[MessageExt]:
        out: list[MessageExt] = []
        async with Admin(cluster.namesrv_addr, session_credentials=ADMIN) as a:
            for qid in range(QUEUES):
                offset = 0
                for _ in range(100):
                    msgs, offset = await a.pull_messages(topic, "broker-a", qid, offset)
                    if not msgs:
                        break
                    out.extend(msgs)
        return out

    return asyncio.run(read())


def _create_topic(cluster: Cluster, topic: str) -> None:
    """Create ``topic`` and wait (bounded) until the NameServer routes it, so a send's failure
    is the broker's refusal and never a route not yet registered."""
    async def create() -> None:
        async with Admin(cluster.namesrv_addr, session_credentials=ADMIN) as a:
            await a.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)

            async def routed() -> bool:
                try:
                    return bool((await a.examine_topic_route_info(topic)).queueDatas)
                except MQClientError:
                    return False

            assert await wait_for_async(routed, 20), f"{topic} not routed"

    asyncio.run(create())


def _produce(cpp: CppClients, names: Names, specs: list[dict[str, str]], credentials: list[str] | None
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lines = cpp.start("produce", topic=names.topic, group=names.producer_group, mode="sync", messages=specs,
                      credentials=credentials, report_failures=True, timeout_ms=3000).finish(120)
    return [x for x in lines if x["kind"] == "sent"], [x for x in lines if x["kind"] == "failed"]


def test_cpp_client_sends_and_consumes_with_its_account(cpp: CppClients, acl_cluster: Cluster,
                                                        names: Names) -> None:
    _create_topic(acl_cluster, names.topic)
    specs = [{"body": f"acl-{i}", "tags": "A"} for i in range(6)]
    sent, failed = _produce(cpp, names, specs, ["cpp-client", "cpp-secret"])
    assert not failed and len(sent) == 6 and all(s["status"] == 0 for s in sent)
    assert sorted(m.body.decode() for m in _stored(acl_cluster, names.topic)) == sorted(s["body"] for s in specs)
    consumer = cpp.push(names.topic, names.group, credentials=["cpp-client", "cpp-secret"])
    consumer.wait_for(lambda p: len(p.messages()) >= 6, 40, "the six signed messages")
    consumer.stop()
    assert sorted(m["body"] for m in consumer.messages()) == sorted(s["body"] for s in specs)


@pytest.mark.parametrize("credentials", [["cpp-client", "not-the-secret"], None], ids=["wrong-secret", "none"])
def test_cpp_client_refused_without_the_right_secret(cpp: CppClients, acl_cluster: Cluster, names: Names,
                                                     credentials: list[str] | None) -> None:
    _create_topic(acl_cluster, names.topic)
    started = time.monotonic()
    sent, failed = _produce(cpp, names, [{"body": "refused-0"}, {"body": "refused-1"}], credentials)
    assert not sent and len(failed) == 2, (sent, failed)
    assert _stored(acl_cluster, names.topic) == []
    # librocketmq writes an empty AccessKey when it has no account, which Java's check (and ours)
    # reads as an unknown account. Its own error says only "No route info of this topic" once its
    # retries are spent, whatever the broker answered: the broker's WARN lines say why.
    reason = "Check signature failed for accessKey=cpp-client" if credentials else "No acl config for "
    log = os.path.join(acl_cluster.broker.home, "logs", "broker.log")
    lines = acl_cluster.broker.lines + (open(log).read().splitlines() if os.path.exists(log) else [])
    sends = ("refused request code 10 ", "refused request code 310 ")  # SEND_MESSAGE or its V2
    assert any(any(s in line for s in sends) and line.endswith(reason) for line in lines), lines[-10:]
    print(f"C++ send refused ({'wrong secret' if credentials else 'no credentials'}) "
          f"in {time.monotonic() - started:.1f}s: {failed[0]['error'][:160]}")
