"""A real mqnamesrv process driven over the wire, as brokers and clients drive it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import zlib

import pytest

from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.json_body import loads
from rocketmq_py.remoting.protocol.namesrv import RegisterBrokerRequestHeader
from rocketmq_py.remoting.protocol.route import ClusterInfo, RegisterBrokerBody, TopicRouteData
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.integration.daemons import Daemon, DaemonSet

# Shortened liveness (ms) so expiry is observable in seconds; passed as a properties file (-c).
SHORT_EXPIRY = "brokerChannelExpiredTime=1500\nscanNotActiveBrokerInterval=200\n"


@pytest.fixture
def namesrv(daemons: DaemonSet, tmp_path: str) -> Daemon:
    conf = os.path.join(str(tmp_path), "namesrv.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write(SHORT_EXPIRY)
    return daemons.namesrv(config_file=conf)


def register_request(broker_name: str, addr: str, topics: dict[str, int], counter: int = 1,
                     broker_id: int = 0, cluster: str = "DefaultCluster") -> RemotingCommand:
    body = RegisterBrokerBody(topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
        dataVersion=DataVersion(counter=counter, timestamp=1700000000000),
        topicConfigTable={t: TopicConfig(topicName=t, readQueueNums=q, writeQueueNums=q) for t, q in topics.items()}))
    header = RegisterBrokerRequestHeader(brokerName=broker_name, brokerAddr=addr, clusterName=cluster,
                                         haServerAddr=addr.replace("10911", "10912"), brokerId=broker_id)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body.encode())


async def route(client: RemotingClient, ns: str, topic: str, version: int = 409) -> RemotingCommand:
    req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    req.version = version
    return await client.invoke(ns, req, 3)


async def wait_until_no_route(client: RemotingClient, ns: str, topic: str, timeout: float) -> float:
    """Poll the route until it is gone (bounded); returns the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if (await route(client, ns, topic)).code == ResponseCode.TOPIC_NOT_EXIST:
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"route of {topic} still present after {timeout}s")


async def test_register_then_route_with_both_json_forms(namesrv: Daemon) -> None:
    broker = RemotingClient()  # a separate connection, as a broker has
    c = RemotingClient()
    try:
        resp = await broker.invoke(namesrv.addr, register_request("broker-a", "10.0.0.1:10911", {"TopicA": 4}), 3)
        assert resp.code == ResponseCode.SUCCESS
        resp = await broker.invoke(namesrv.addr,
                                   register_request("broker-a", "10.0.0.3:10911", {"TopicA": 4}, broker_id=1), 3)
        assert resp.ext_fields == {"masterAddr": "10.0.0.1:10911", "haServerAddr": "10.0.0.1:10912"}

        new = await route(c, namesrv.addr, "TopicA", version=409)
        assert new.code == ResponseCode.SUCCESS
        body = json.loads(new.body)  # >= 4.9.4: standard JSON
        assert body["brokerDatas"] == [{"brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.3:10911"},
                                        "brokerName": "broker-a", "cluster": "DefaultCluster"}]
        assert body["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                                       "topicSysFlag": 0, "writeQueueNums": 4}]
        old = await route(c, namesrv.addr, "TopicA", version=317)  # the Go client's version
        assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.3:10911"}' in old.body
        assert TopicRouteData.decode(old.body) == TopicRouteData.decode(new.body)

        info = await c.invoke(namesrv.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
        assert b'"brokerAddrs":{0:' in info.body
        cluster = ClusterInfo.decode(info.body)
        assert cluster.clusterAddrTable == {"DefaultCluster": ["broker-a"]}

        missing = await route(c, namesrv.addr, "Nope")
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        assert missing.remark.startswith("No topic route info in name server for the topic: Nope")
    finally:
        await broker.close()
        await c.close()


async def test_silent_broker_expires_and_closed_connection_drops_at_once(namesrv: Daemon,
                                                                          client: RemotingClient) -> None:
    silent, closing = RemotingClient(), RemotingClient()
    try:
        await silent.invoke(namesrv.addr, register_request("broker-s", "10.0.0.5:10911", {"Silent": 1}), 3)
        await closing.invoke(namesrv.addr, register_request("broker-c", "10.0.0.6:10911", {"Closing": 1}), 3)
        assert (await route(client, namesrv.addr, "Closing")).code == ResponseCode.SUCCESS
        await closing.close()
        assert await wait_until_no_route(client, namesrv.addr, "Closing", 1.0) < 1.0
        # The silent broker's connection stays open but it never registers again: dropped after
        # the configured 1.5 s expiry (scanned every 0.2 s).
        assert (await route(client, namesrv.addr, "Silent")).code == ResponseCode.SUCCESS
        took = await wait_until_no_route(client, namesrv.addr, "Silent", 6.0)
        assert took > 0.5
    finally:
        await silent.close()


async def test_two_nameservers_are_independent(daemons: DaemonSet, client: RemotingClient) -> None:
    a, b = daemons.namesrv(name="a"), daemons.namesrv(name="b")
    assert a.port != b.port
    await client.invoke(a.addr, register_request("broker-a", "10.0.0.1:10911", {"OnlyOnA": 1}), 3)
    assert (await route(client, a.addr, "OnlyOnA")).code == ResponseCode.SUCCESS
    assert (await route(client, b.addr, "OnlyOnA")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_kv_config_and_order_topic_conf_survive_restart(daemons: DaemonSet, client: RemotingClient) -> None:
    d = daemons.namesrv("orderMessageEnable=true", name="kv")
    put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG,
                                  {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "broker-a:4"})
    assert (await client.invoke(d.addr, put, 3)).code == ResponseCode.SUCCESS
    reg = await client.invoke(d.addr, register_request("broker-a", "10.0.0.1:10911", {"Orders": 4}), 3)
    assert loads(reg.body) == {"table": {"Orders": "broker-a:4"}}, "registration answers the order config"
    r = await route(client, d.addr, "Orders")
    assert json.loads(r.body)["orderTopicConf"] == "broker-a:4"
    assert d.stop() == 0

    d = daemons.namesrv(name="kv")  # same home dir: kvConfig.json is read back
    get = RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders"})
    assert (await client.invoke(d.addr, get, 3)).ext_fields == {"value": "broker-a:4"}
    await client.invoke(d.addr, register_request("broker-a", "10.0.0.1:10911", {"Orders": 4}), 3)
    assert json.loads((await route(client, d.addr, "Orders")).body).get("orderTopicConf") is None, \
        "orderTopicConf only with orderMessageEnable"
    lst = RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
    assert loads((await client.invoke(d.addr, lst, 3)).body) == {"table": {"Orders": "broker-a:4"}}
    delete = RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG",
                                                                    "key": "Orders"})
    assert (await client.invoke(d.addr, delete, 3)).code == ResponseCode.SUCCESS
    assert (await client.invoke(d.addr, get, 3)).code == ResponseCode.QUERY_NOT_FOUND


async def test_compressed_and_bodiless_registrations(namesrv: Daemon, client: RemotingClient) -> None:
    ns = namesrv.addr
    plain = register_request("broker-z", "10.0.0.7:10911", {"Zipped": 2, "Zapped": 3}, counter=9)
    body = RegisterBrokerBody.decode(plain.body).encode_compressed()
    plain.ext_fields.update(compressed="true", bodyCrc32=str(zlib.crc32(body) & 0x7FFFFFFF))  # type: ignore[union-attr]
    plain.body = body
    assert (await client.invoke(ns, plain, 3)).code == ResponseCode.SUCCESS
    qds = json.loads((await route(client, ns, "Zapped")).body)["queueDatas"]
    assert [(q["brokerName"], q["writeQueueNums"]) for q in qds] == [("broker-z", 3)]

    # A broker with no body registers an empty table at data version 0/0, as Java does.
    bare = RemotingCommand.request(RequestCode.REGISTER_BROKER, RegisterBrokerRequestHeader(
        brokerName="broker-e", brokerAddr="10.0.0.8:10911", clusterName="DefaultCluster",
        haServerAddr="10.0.0.8:10912", brokerId=0))
    assert (await client.invoke(ns, bare, 3)).code == ResponseCode.SUCCESS
    query = {"brokerName": "broker-e", "brokerAddr": "10.0.0.8:10911", "clusterName": "DefaultCluster",
             "brokerId": "0"}
    same = await client.invoke(ns, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, query,
                                                           DataVersion(counter=0, timestamp=0).encode()), 3)
    assert same.ext_fields == {"changed": "false"} and loads(same.body) == {"counter": 0, "timestamp": 0}
    newer = await client.invoke(ns, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, query,
                                                            DataVersion(counter=1, timestamp=5).encode()), 3)
    assert newer.ext_fields == {"changed": "true"}


async def test_unregister_master_and_slave(namesrv: Daemon, client: RemotingClient) -> None:
    ns = namesrv.addr
    await client.invoke(ns, register_request("broker-u", "10.0.0.1:10911", {"U": 2}), 3)
    await client.invoke(ns, register_request("broker-u", "10.0.0.2:10911", {"U": 2}, broker_id=1), 3)

    def unregister(addr: str, broker_id: int) -> RemotingCommand:
        return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, {
            "brokerName": "broker-u", "brokerAddr": addr, "clusterName": "DefaultCluster", "brokerId": str(broker_id)})

    assert (await client.invoke(ns, unregister("10.0.0.2:10911", 1), 3)).code == ResponseCode.SUCCESS
    body = json.loads((await route(client, ns, "U")).body)
    assert body["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert (await client.invoke(ns, unregister("10.0.0.1:10911", 0), 3)).code == ResponseCode.SUCCESS
    assert (await route(client, ns, "U")).code == ResponseCode.TOPIC_NOT_EXIST
    info = ClusterInfo.decode((await client.invoke(ns, RemotingCommand.request(
        RequestCode.GET_BROKER_CLUSTER_INFO), 3)).body)
    assert info.brokerAddrTable == {} and info.clusterAddrTable == {}


async def test_sigint_shuts_down_cleanly(daemons: DaemonSet, client: RemotingClient) -> None:
    d = daemons.namesrv(name="int")
    # One answered request proves the loop has passed the boot line and installed its handlers.
    assert (await route(client, d.addr, "Any")).code == ResponseCode.TOPIC_NOT_EXIST
    d.proc.send_signal(signal.SIGINT)
    assert d.proc.wait(10) == 0
    assert any("shutting down" in line for line in d.lines)


async def test_admin_requests(namesrv: Daemon, client: RemotingClient) -> None:
    ns = namesrv.addr
    await client.invoke(ns, register_request("broker-a", "10.0.0.1:10911", {"T1": 2, "T2": 2}), 3)
    await client.invoke(ns, register_request("broker-x", "10.0.9.1:10911", {"T3": 1}, cluster="Other"), 3)

    async def call(code: int, header: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
        return await client.invoke(ns, RemotingCommand.request(code, header, body), 3)

    topics = loads((await call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)["topicList"]
    assert sorted(topics) == ["T1", "T2", "T3"]
    by_cluster = loads((await call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"})).body)
    assert by_cluster["topicList"] == ["T3"]
    system = loads((await call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
    assert set(system["topicList"]) == {"DefaultCluster", "Other", "broker-a", "broker-x"} and system["brokerAddr"]
    wiped = await call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert wiped.ext_fields == {"wipeTopicCount": "2"}
    assert json.loads((await route(client, ns, "T1")).body)["queueDatas"][0]["perm"] == 4
    assert (await call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2"})).code == ResponseCode.SUCCESS
    assert (await route(client, ns, "T2")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await call(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"orderMessageEnable=true\n")).code == 0
    assert b"orderMessageEnable=true" in (await call(RequestCode.GET_NAMESRV_CONFIG)).body
    refused = await call(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"kvConfigPath=/etc/passwd\n")
    assert refused.code == ResponseCode.NO_PERMISSION and "black list" in refused.remark
    version = await client.invoke(ns, RemotingCommand.request(
        RequestCode.QUERY_DATA_VERSION, {"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911",
                                         "clusterName": "DefaultCluster", "brokerId": "0"},
        DataVersion(counter=1, timestamp=1700000000000).encode()), 3)
    assert version.ext_fields == {"changed": "false"}


async def test_bad_input_changes_nothing(namesrv: Daemon, client: RemotingClient) -> None:
    ns = namesrv.addr
    await client.invoke(ns, register_request("broker-a", "10.0.0.1:10911", {"Keep": 1}), 3)
    before = (await route(client, ns, "Keep")).body

    bad_body = RemotingCommand.request(RequestCode.REGISTER_BROKER, RegisterBrokerRequestHeader(
        brokerName="broker-z", brokerAddr="10.0.0.9:10911", clusterName="DefaultCluster",
        haServerAddr="x", brokerId=0), b'{"topicConfigSerializeWrapper": {"topicConfigTable": 42}}')
    resp = await client.invoke(ns, bad_body, 3)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "bad register broker body" in resp.remark

    no_header = await client.invoke(ns, RemotingCommand.request(RequestCode.REGISTER_BROKER, {"brokerName": "x"}), 3)
    assert no_header.code == ResponseCode.SYSTEM_ERROR and "<brokerAddr> is null" in no_header.remark

    crc = register_request("broker-y", "10.0.0.8:10911", {"Y": 1})
    crc.ext_fields["bodyCrc32"] = "12345"  # type: ignore[index]
    resp = await client.invoke(ns, crc, 3)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "crc32 not match"

    zipped = RemotingCommand.request(RequestCode.REGISTER_BROKER, RegisterBrokerRequestHeader(
        brokerName="broker-w", brokerAddr="10.0.0.10:10911", clusterName="DefaultCluster", haServerAddr="x",
        brokerId=0, compressed=True), zlib.compress(b"\x00\x00\x00\x02{}\x00"))
    resp = await client.invoke(ns, zipped, 3)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "bad register broker body" in resp.remark

    no_topic = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 3)
    assert no_topic.code == ResponseCode.SYSTEM_ERROR and "<topic> is null" in no_topic.remark

    unknown = await client.invoke(ns, RemotingCommand.request(9999), 3)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    info = ClusterInfo.decode((await client.invoke(ns, RemotingCommand.request(
        RequestCode.GET_BROKER_CLUSTER_INFO), 3)).body)
    assert set(info.brokerAddrTable) == {"broker-a"}, "no bad registration reached the registry"
    assert (await route(client, ns, "Keep")).body == before
    assert namesrv.alive()


def test_fixture_accepts_a_daemon_killed_on_purpose(daemons: DaemonSet) -> None:
    d = daemons.namesrv(name="killed")
    d.kill()
    assert not d.alive() and daemons.stop_all() == {}
