"""ACL acceptance against real daemons: every request code a broker and a NameServer serve, tried
without credentials, with a wrong signature, signed by an account lacking the permission, and
from an address the account does not white-list -- each answered NO_PERMISSION with nothing
changed -- then by the right account, served. Plus the SDK signing and the file's reload."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from rocketmq_py.acl.acl_client_rpc_hook import AclClientRPCHook
from rocketmq_py.acl.permission import ADMIN_CODE
from rocketmq_py.acl.plain_access_validator import REMARK_PREFIX
from rocketmq_py.acl.session_credentials import ACCESS_KEY
from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import BrokerController
from rocketmq_py.client import Admin, LitePullConsumer, Message, MQClientError, Producer, SessionCredentials
from rocketmq_py.client.sync import BlockingProducer
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.namesrv.controller import NamesrvController
from rocketmq_py.remoting import RemotingClient
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig
from tests.integration.cli import run_cli
from tests.integration.daemons import DaemonSet
from tests.waiting import wait_for_async, wait_until

TOPIC = "AclTopic"
GROUP = "AclGroup"
ADMIN_CREDS = SessionCredentials("admin-ak", "admin-secret")
WEAK_CREDS = SessionCredentials("weak-ak1", "weak-secret")
WRONG_CREDS = SessionCredentials("admin-ak", "not-the-secret")
ACL = f"""
accounts:
  - accessKey: admin-ak
    secretKey: admin-secret
    admin: true
  - accessKey: weak-ak1
    secretKey: weak-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
  - accessKey: white-ak
    secretKey: white-secret
    whiteRemoteAddress: 10.9.9.*
    admin: true
  - accessKey: client-ak
    secretKey: client-secret
    topicPerms: [{TOPIC}=PUB|SUB]
    groupPerms: [{GROUP}=SUB]
"""
# Codes PlainAccessValidator.parse gives resources to (4.9.7); every other code needs an account
# and, for ADMIN_CODE, the admin flag.
RESOURCE_CODES = {int(c) for c in (
    RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.CONSUMER_SEND_MSG_BACK,
    RequestCode.PULL_MESSAGE, RequestCode.QUERY_MESSAGE, RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.UPDATE_CONSUMER_OFFSET)}
TIMEOUT = 5.0


def _served_codes(tmp: Path) -> tuple[set[int], set[int]]:
    """The codes of the broker's and the NameServer's processor tables, read from the tables."""
    broker = BrokerController(BrokerConfig(brokerName="broker-a"), NettyServerConfig(listenPort=0),
                              MessageStoreConfig(storePathRootDir=str(tmp / "codes-store")))
    namesrv = NamesrvController(NamesrvConfig(kvConfigPath=str(tmp / "kv.json")), NettyServerConfig(listenPort=0))
    return (broker.remoting_server.processors.codes() | broker.fast_server.processors.codes(),
            namesrv.remoting_server.processors.codes())


def _request(code: int, creds: SessionCredentials | None = None, access_key: str | None = None) -> RemotingCommand:
    """A request of ``code`` naming the test's topic and group in every key the resource mapping
    reads (and the fields their headers need), signed by ``creds``."""
    ext = {"topic": TOPIC, "consumerGroup": GROUP, "group": GROUP, "a": "AclProducer", "b": TOPIC,
           "producerGroup": "AclProducer", "clientID": "acl-client", "queueId": "0", "commitOffset": "0",
           "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0", "subVersion": "0", "offset": "0",
           "key": "k", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "0", "namespace": "ns"}
    body = None
    if code == RequestCode.HEART_BEAT:
        body = json.dumps({"clientID": "acl-client", "consumerDataSet": [{
            "groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}]}], "producerDataSet": []}).encode()
    request = RemotingCommand.request(code, ext, body)
    if access_key is not None:
        request.ext_fields[ACCESS_KEY] = access_key  # type: ignore[index]
    if creds is not None:
        AclClientRPCHook(creds).do_before_request("", request)
    return request


async def _call(addr: str, request: RemotingCommand) -> RemotingCommand | None:
    """The answer, or None when none came in time (a processor that answers later or never)."""
    client = RemotingClient()
    try:
        return await client.invoke(addr, request, TIMEOUT)
    except RemotingError:
        return None
    finally:
        await client.close()


def _acl_refused(answer: RemotingCommand | None) -> bool:
    return (answer is not None and answer.code == ResponseCode.NO_PERMISSION
            and (answer.remark or "").startswith(REMARK_PREFIX))


Snapshot = Callable[[], Awaitable[list[tuple[int, str | None, bytes | None]]]]


async def _matrix(addr: str, codes: set[int], needs_permission: Callable[[int], bool],
                  snapshot: Snapshot) -> tuple[int, list[str]]:
    """Cases tried and bypasses found (a refusal expected, something else answered)."""
    cases: list[tuple[str, int, RemotingCommand]] = []
    for code in sorted(codes):
        cases.append(("no credentials", code, _request(code)))
        cases.append(("wrong signature", code, _request(code, WRONG_CREDS)))
        cases.append(("address not white-listed", code, _request(code, access_key="white-ak")))
        if needs_permission(code):
            cases.append(("account lacking permission", code, _request(code, WEAK_CREDS)))
    before = await snapshot()
    answers = await asyncio.gather(*(_call(addr, request) for _, _, request in cases))
    bypasses = [f"{case} code {code}: {a and (a.code, a.remark)}"
                for (case, code, _), a in zip(cases, answers, strict=True) if not _acl_refused(a)]
    assert await snapshot() == before, "a refused request changed the daemon's state"
    served = await asyncio.gather(*(_call(addr, _request(code, ADMIN_CREDS)) for code in sorted(codes)))
    bypasses += [f"right account refused, code {code}" for code, a in zip(sorted(codes), served, strict=True)
                 if _acl_refused(a)]
    return len(cases) + len(codes), bypasses


def _acl_file(tmp: Path, text: str = ACL) -> Path:
    path = tmp / "plain_acl.yml"
    path.write_text(text)
    return path


async def test_every_broker_and_namesrv_code(daemons: DaemonSet, tmp_path: Path) -> None:
    broker_codes, namesrv_codes = _served_codes(tmp_path)
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    acl_ns = daemons.namesrv("aclEnable=true", f"aclPlainFile={acl}", name="acl-ns")
    async with Producer("AclProducer", ns.addr, session_credentials=ADMIN_CREDS) as producer:
        assert (await producer.send(Message(TOPIC, b"before"))).send_status.name == "SEND_OK"

    async def broker_state() -> list[tuple[int, str | None, bytes | None]]:
        reads = [(RequestCode.GET_ALL_TOPIC_CONFIG, {}), (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}),
                 (RequestCode.GET_ALL_CONSUMER_OFFSET, {}), (RequestCode.GET_BROKER_CONFIG, {}),
                 (RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}),
                 (RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})]
        out = []
        for code, ext in reads:
            request = RemotingCommand.request(code, dict(ext))
            AclClientRPCHook(ADMIN_CREDS).do_before_request("", request)
            a = await _call(broker.addr, request)
            assert a is not None
            body = a.body
            if code == RequestCode.GET_ALL_TOPIC_CONFIG or code == RequestCode.GET_ALL_CONSUMER_OFFSET:
                body = json.dumps({k: v for k, v in json.loads(body or b"{}").items() if k != "dataVersion"}
                                  ).encode()
            out.append((a.code, a.remark, body, str(a.ext_fields)))
        return out  # type: ignore[return-value]

    async def namesrv_state() -> list[tuple[int, str | None, bytes | None]]:
        out = []
        for code, ext in [(RequestCode.GET_NAMESRV_CONFIG, {}), (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
                          (RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})]:
            request = RemotingCommand.request(code, dict(ext))
            AclClientRPCHook(ADMIN_CREDS).do_before_request("", request)
            a = await _call(acl_ns.addr, request)
            assert a is not None
            out.append((a.code, a.remark, a.body))
        return out

    broker_tried, broker_bypasses = await _matrix(
        broker.addr, broker_codes, lambda c: c in RESOURCE_CODES or c in ADMIN_CODE, broker_state)
    ns_tried, ns_bypasses = await _matrix(acl_ns.addr, namesrv_codes, lambda c: c in ADMIN_CODE, namesrv_state)
    print(f"ACL matrix: broker {len(broker_codes)} codes, {broker_tried} cases; NameServer {len(namesrv_codes)} "
          f"codes, {ns_tried} cases; bypasses {len(broker_bypasses) + len(ns_bypasses)}")
    assert broker_bypasses == [] and ns_bypasses == []
    assert len(broker_codes) >= 50 and len(namesrv_codes) >= 15  # the tables were read, not empty
    lines = [line for line in _broker_log(broker) if "accessKey=weak-ak1" in line and "WARN" in line]
    assert lines and "127.0.0.1" in lines[0], "no WARN line naming the address and account"


async def test_sdk_signs_and_is_refused_without_permission(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    async with Admin(ns.addr, session_credentials=ADMIN_CREDS) as admin:
        await admin.create_topic(TOPIC, broker_addr=broker.addr)
    client = SessionCredentials("client-ak", "client-secret")
    async with Producer("AclProducer", ns.addr, session_credentials=client) as producer:
        sent = await producer.send(Message(TOPIC, b"signed"))
        assert sent.send_status.name == "SEND_OK"
    # NO_PERMISSION is among the codes Java's producer retries on another queue before giving up
    with pytest.raises(MQClientError) as refused:
        async with Producer("AclProducer", ns.addr, instance_name="weak", session_credentials=WEAK_CREDS) as p:
            await p.send(Message(TOPIC, b"refused"))
    assert "No default permission for topic:AclTopic" in str(refused.value)
    with pytest.raises(MQClientError, match="No accessKey is configured"):
        async with Producer("AclProducer", ns.addr, instance_name="anon") as p:
            await p.send(Message(TOPIC, b"refused"))
    consumer = LitePullConsumer(GROUP, ns.addr, session_credentials=client,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += [m.body for m in await consumer.poll(1.0)]
        assert got == [b"signed"]
    finally:
        await consumer.shutdown()


async def test_reload_adds_and_removes_accounts(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}", "aclWatchInterval=200")
    newcomer = SessionCredentials("new-account", "new-secret")

    async def runtime_info(creds: SessionCredentials) -> RemotingCommand | None:
        return await _call(broker.addr, _request(RequestCode.GET_BROKER_RUNTIME_INFO, creds))

    async def served(creds: SessionCredentials) -> bool:
        answer = await runtime_info(creds)
        return answer is not None and answer.code == ResponseCode.SUCCESS

    async def refused(creds: SessionCredentials) -> bool:
        return _acl_refused(await runtime_info(creds))

    assert await refused(newcomer) and await served(WEAK_CREDS)
    acl.write_text(ACL + "  - accessKey: new-account\n    secretKey: new-secret\n")
    started = time.monotonic()
    assert await wait_for_async(lambda: served(newcomer), 5.0, 0.05)
    added_after = time.monotonic() - started
    acl.write_text(ACL.replace("weak-ak1", "weak-ak2"))
    assert await wait_for_async(lambda: refused(WEAK_CREDS), 5.0, 0.05)
    assert await refused(newcomer)
    # a broken edit keeps the accounts in force
    acl.write_text("accounts: [{accessKey: x}]")
    assert await wait_until(lambda: "plain ACL not reloaded" in "\n".join(_broker_log(broker)), 5.0)
    assert (await runtime_info(ADMIN_CREDS)).code == 0  # type: ignore[union-attr]
    print(f"ACL reload: a new account served {added_after:.2f}s after the write (interval 0.2 s)")


def _broker_log(broker: object) -> list[str]:
    path = Path(broker.home, "logs", "broker.log")  # type: ignore[attr-defined]
    return broker.lines + (path.read_text().splitlines() if path.exists() else [])  # type: ignore[attr-defined]


def test_bad_acl_file_stops_the_broker(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path, "accounts: [{accessKey: short, secretKey: 12345678}]")
    ns = daemons.namesrv()
    with pytest.raises(RuntimeError, match="length should longer than 6"):
        daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    with pytest.raises(RuntimeError, match="cannot read ACL file"):
        daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={os.path.join(str(tmp_path), 'missing.yml')}",
                       name="broker-b")


def test_mqadmin_signs_with_ak_sk_or_tools_yml(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    bare_home = tmp_path / "bare-home"
    bare_home.mkdir()
    update = ("updateTopic", "-t", "MqadminAclTopic", "-b", broker.addr, "-n", ns.addr)
    env = {"ROCKETMQ_HOME": str(bare_home)}
    run_cli("mqadmin", *update, env=env).failed_with_one_line("No accessKey is configured")
    run_cli("mqadmin", *update, "--ak", "weak-ak1", "--sk", "weak-secret", env=env).failed_with_one_line(
        "Need admin permission for request code=17, but accessKey=weak-ak1 is not")
    run_cli("mqadmin", *update, "--ak", "admin-ak", "--sk", "wrong-secret", env=env).failed_with_one_line(
        "Check signature failed for accessKey=admin-ak")
    run_cli("mqadmin", *update, "--ak", "admin-ak", env=env).failed_with_one_line("--ak and --sk go together")
    run_cli("mqadmin", *update, "--ak", "admin-ak", "--sk", "admin-secret", env=env).ok()
    # Java's mqadmin reads its account from $ROCKETMQ_HOME/conf/tools.yml
    tools_home = tmp_path / "tools-home"
    (tools_home / "conf").mkdir(parents=True)
    (tools_home / "conf" / "tools.yml").write_text("accessKey: admin-ak\nsecretKey: admin-secret\n")
    run_cli("mqadmin", "updateTopic", "-t", "MqadminAclTopic2", "-b", broker.addr, "-n", ns.addr,
            env={"ROCKETMQ_HOME": str(tools_home)}).ok()
    routes = run_cli("mqadmin", "topicList", "-n", ns.addr, "--json", env=env).ok().json()
    assert {"MqadminAclTopic", "MqadminAclTopic2"} <= set(json.dumps(routes).replace('"', " ").split())


def test_mqadmin_acl_commands(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    env = {"ROCKETMQ_HOME": str(tmp_path)}
    as_admin = ("-b", broker.addr, "-n", ns.addr, "--ak", "admin-ak", "--sk", "admin-secret")
    version = run_cli("mqadmin", "clusterAclConfigVersion", *as_admin, "--json", env=env).ok().json()
    assert version[0]["brokerAddr"] == broker.addr and version[0]["counter"] == 0
    run_cli("mqadmin", "updateAclConfig", "-a", "newcomer1", "-s", "newcomer-secret", "-t", "NewTopic=PUB",
            "-u", "SUB", *as_admin, env=env).ok()
    assert "newcomer1" in acl.read_text()
    assert run_cli("mqadmin", "clusterAclConfigVersion", *as_admin, "--json", env=env).ok().json()[0]["counter"] == 1
    listed = run_cli("mqadmin", "getAclConfig", *as_admin, "--json", env=env).ok().json()[broker.addr]
    account = next(a for a in listed["plainAccessConfigs"] if a["accessKey"] == "newcomer1")
    assert account["topicPerms"] == ["NewTopic=PUB"] and account["defaultGroupPerm"] == "SUB"

    async def runtime_info(creds: SessionCredentials | None) -> RemotingCommand | None:
        return await _call(broker.addr, _request(RequestCode.GET_BROKER_RUNTIME_INFO, creds))

    newcomer = SessionCredentials("newcomer1", "newcomer-secret")
    assert asyncio.run(runtime_info(newcomer)).code == ResponseCode.SUCCESS  # type: ignore[union-attr]
    # refused changes change nothing: a bad permission, a short key, a non-admin account
    before = acl.read_text()
    run_cli("mqadmin", "updateAclConfig", "-a", "newcomer1", "-s", "newcomer-secret", "-t", "NewTopic=ALL",
            *as_admin, env=env).failed_with_one_line("The expected permissions are")
    run_cli("mqadmin", "updateAclConfig", "-a", "short", "-s", "newcomer-secret", *as_admin,
            env=env).failed_with_one_line("length should longer than 6")
    run_cli("mqadmin", "updateAclConfig", "-a", "weak-ak1", "-s", "weak-secret", "-m", "true", "-b", broker.addr,
            "-n", ns.addr, "--ak", "weak-ak1", "--sk", "weak-secret", env=env).failed_with_one_line(
        "Need admin permission for request code=50")
    assert acl.read_text() == before
    run_cli("mqadmin", "deleteAccessConfig", "-a", "newcomer1", *as_admin, env=env).ok()
    assert _acl_refused(asyncio.run(runtime_info(newcomer)))
    run_cli("mqadmin", "deleteAccessConfig", "-a", "newcomer1", *as_admin, env=env).failed_with_one_line(
        "The accesskey[newcomer1] corresponding to accessConfig has been deleted failed.")
    assert _acl_refused(asyncio.run(runtime_info(None)))
    run_cli("mqadmin", "updateGlobalWhiteAddr", "-g", "127.0.0.1", *as_admin, env=env).ok()
    assert asyncio.run(runtime_info(None)).code == ResponseCode.SUCCESS  # type: ignore[union-attr]
    listed = run_cli("mqadmin", "getAccessConfigSubCommand", *as_admin, "--json", env=env).ok().json()
    assert listed[broker.addr]["globalWhiteAddrs"] == ["127.0.0.1"]
    assert run_cli("mqadmin", "clusterAclConfigVersion", *as_admin, "--json", env=env).ok().json()[0]["counter"] == 3


def test_mqbench_signs_with_ak_sk(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    bench = ("produce", "-t", TOPIC, "-m", "20", "-n", ns.addr, "--json")
    run_cli("mqbench", *bench, "--ak", "client-ak").failed_with_one_line("--ak and --sk go together")
    signed = run_cli("mqbench", *bench, "--ak", "client-ak", "--sk", "client-secret").ok()
    summary = json.loads(signed.stdout.strip().splitlines()[-1])
    assert summary["side"] == "send" and summary["failed"] == 0, summary
    refused = run_cli("mqbench", *bench, "--ak", "client-ak", "--sk", "wrong-secret")
    # the SDK's retry warnings come first; the command's own line is the last
    last = refused.stderr.strip().splitlines()[-1]
    assert refused.returncode == 1 and last.startswith("mqbench produce:"), refused.stderr
    assert "Check signature failed for accessKey=client-ak" in last


def test_blocking_facade_signs(daemons: DaemonSet, tmp_path: Path) -> None:
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv()
    daemons.broker(ns.addr, "aclEnable=true", f"aclPlainFile={acl}")
    client = SessionCredentials("client-ak", "client-secret")
    producer = BlockingProducer("AclProducer", ns.addr, instance_name="blocking", session_credentials=client)
    producer.start()
    try:
        assert producer.send(Message(TOPIC, b"blocking")).send_status.name == "SEND_OK"
    finally:
        producer.shutdown()
    anonymous = BlockingProducer("AclProducer", ns.addr, instance_name="blocking-anon")
    anonymous.start()
    try:
        with pytest.raises(MQClientError, match="No accessKey is configured"):
            anonymous.send(Message(TOPIC, b"refused"))
    finally:
        anonymous.shutdown()


async def test_broker_signs_its_registration(daemons: DaemonSet, tmp_path: Path) -> None:
    """A NameServer with ACL and no white-listed address: a broker with an account
    (innerClientAuthenticationCredentials) registers and is routed; one without is refused and
    logs the refusal."""
    acl = _acl_file(tmp_path)
    ns = daemons.namesrv("aclEnable=true", f"aclPlainFile={acl}")
    account = json.dumps({"accessKey": "client-ak", "secretKey": "client-secret"}, separators=(",", ":"))
    signed = daemons.broker(ns.addr, f"innerClientAuthenticationCredentials={account}", name="broker-signed")
    unsigned = daemons.broker(ns.addr, name="broker-unsigned")
    async with Admin(ns.addr, session_credentials=ADMIN_CREDS) as admin:
        async def routed() -> bool:
            info = await admin.examine_broker_cluster_info()
            return "broker-signed" in info.brokerAddrTable

        assert await wait_for_async(routed, 20)
        refusal = f"register broker to name server {ns.addr} refused: {int(ResponseCode.NO_PERMISSION)}"
        assert await wait_until(lambda: any(refusal in line for line in _broker_log(unsigned)), 20)
        info = await admin.examine_broker_cluster_info()
    assert info.brokerAddrTable["broker-signed"].brokerAddrs[0] == signed.addr
    assert "broker-unsigned" not in info.brokerAddrTable


def test_bad_inner_client_credentials_stop_the_broker(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    with pytest.raises(RuntimeError, match="innerClientAuthenticationCredentials: expected JSON"):
        daemons.broker(ns.addr, 'innerClientAuthenticationCredentials={"accessKey":"only-ak"}')
