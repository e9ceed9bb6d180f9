"""Admin replies checked key by key against Java 4.9.7's classes, over raw remoting.

The expected keys are the properties fastjson writes for each Java class (its fields with
getters), read from apache/rocketmq 4.9.7 and listed in docs/admin-codes.md; each reply must
have exactly those keys (the optional ones only where Java writes them), with JSON types
matching the Java field types.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from rocketmq_py.remoting import RemotingClient, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketmq_py.remoting.protocol.message import tags_string_to_tags_code
from tests.integration.broker_client import call, commit_offset, create_topic, sent_to_queue_0
from tests.integration.daemons import Daemon
from tests.integration.java_bodies import assert_fields, loads_mq_keyed

# -- the Java classes' properties, as fastjson writes them --------------------------------------

# AdminBrokerProcessor.prepareRuntimeInfo + DefaultMessageStore.getRuntimeInfo +
# StoreStatsService.getRuntimeInfo (remainHowManyDataToCommit only with a transient store pool,
# which ours never has; commitLogDiskRatio_<path> and scheduleMessageOffset_<level> vary).
RUNTIME_INFO_KEYS = {
    "bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
    "putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
    "getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps",
    "putLatency99", "putLatency999",
    "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset", "commitLogMaxOffset",
    "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
    "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize",
    "pullThreadPoolQueueCapacity", "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity",
    "EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes",
    "pageCacheLockTimeMills", "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp",
    "remainTransientStoreBufferNumbs", "remainHowManyDataToFlush", "commitLogDirCapacity",
}
# rocketmq-py's additions to the table (docs/admin-codes.md#get_broker_runtime_info); Java's tools ignore them.
# Ours beside Java's: the parked pulls, and a master's HA keys (docs/ha.md: 5.x's HARuntimeInfo
# fields with an ha prefix, and 4.9.7's haPush2SlaveMaxOffset and slaveFallBehindMuch).
RUNTIME_INFO_ADDITIONS = {
    "pullRequestHoldCount", "haMaster", "haMasterCommitLogMaxOffset", "haSlaveNum", "haInSyncSlaveNums",
    "haPush2SlaveMaxOffset", "slaveFallBehindMuch", "haConnectionInfo",
}
# What ClusterListSubCommand and BrokerStatusSubCommand read without a null check.
CLUSTER_LIST_READS = {
    "putTps", "getTransferedTps", "sendThreadPoolQueueSize", "pullThreadPoolQueueSize",
    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills", "pageCacheLockTimeMills",
    "earliestMessageTimeStamp", "commitLogDiskRatio", "brokerVersionDesc", "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow",
}
LONG_KEYS = {
    "bootTimestamp", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
    "putMessageSizeTotal", "dispatchMaxBuffer", "getMessageEntireTimeMax", "commitLogMinOffset",
    "commitLogMaxOffset", "brokerVersion", "msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
    "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize",
    "pullThreadPoolQueueCapacity", "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity",
    "EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes",
    "pageCacheLockTimeMills", "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp",
    "remainTransientStoreBufferNumbs",
}
DOUBLE_KEYS = {"putMessageAverageSize", "commitLogDiskRatio", "consumeQueueDiskRatio", "putLatency99",
               "putLatency999"}
TPS_KEYS = {"putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"}

GROUP_LIST = {"groupList": list}
# QueryConsumeQueueResponseBody: filterData and subscriptionData only with a consumerGroup,
# queueData only when the index exists.
QUERY_CQ_BODY = {"maxQueueIndex": int, "minQueueIndex": int}
QUERY_CQ_OPTIONAL = {"filterData": str, "subscriptionData": dict, "queueData": list}
# ConsumeQueueData: extendDataJson, bitMap and msg are null (left out) for a unit without a
# consume-queue extension, which is every unit of ours.
CONSUME_QUEUE_DATA = {"physicOffset": int, "physicSize": int, "tagsCode": int, "eval": bool}
SUBSCRIPTION_DATA = {"classFilterMode": bool, "codeSet": list, "expressionType": str, "subString": str,
                     "subVersion": int, "tagsSet": list, "topic": str}
CONSUME_STATS_LIST = {"brokerAddr": str, "consumeStatsList": list, "totalDiff": int}
CONSUME_STATS = {"consumeTps": float, "offsetTable": dict}
OFFSET_WRAPPER = {"brokerOffset": int, "consumerOffset": int, "lastTimestamp": int}


async def test_broker_runtime_info_has_every_java_key(module_broker: Daemon, client: RemotingClient
                                                      ) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "RtTopic")

    async def runtime_info() -> dict[str, str]:
        r = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert r.code == ResponseCode.SUCCESS
        body = json.loads(r.body)
        assert list(body) == ["table"]
        return body["table"]

    first = await runtime_info()
    if first["commitLogMaxOffset"] == "0":
        assert first["earliestMessageTimeStamp"] == "-1", "Java's answer for an empty CommitLog"
    assert 0 < float(first["commitLogDiskRatio"]) < 1 and 0 < float(first["consumeQueueDiskRatio"]) < 1
    await sent_to_queue_0(client, broker.addr, "RtTopic", 3, "a")
    table = await runtime_info()
    assert all(type(v) is str for v in table.values())
    varying = {k for k in table if k.startswith(("commitLogDiskRatio_", "scheduleMessageOffset_"))}
    assert set(table) - varying == RUNTIME_INFO_KEYS | RUNTIME_INFO_ADDITIONS
    assert table["pullRequestHoldCount"] == "0", "no pull is parked here"
    assert CLUSTER_LIST_READS <= set(table)
    assert len([k for k in varying if k.startswith("commitLogDiskRatio_")]) == 1
    for key in LONG_KEYS:
        int(table[key])
    for key in DOUBLE_KEYS | {k for k in varying if k.startswith("commitLogDiskRatio_")}:
        float(table[key])
    for key in TPS_KEYS:
        parts = table[key].split(" ")
        assert len(parts) == 3, (key, table[key])
        for part in parts:
            assert part == "" or float(part) >= 0, (key, table[key])

    def grew(key: str) -> int:
        return int(table[key]) - int(first[key])

    assert grew("msgPutTotalTodayNow") == 3
    assert int(table["putMessageTimesTotal"]) == int(table["msgPutTotalTodayNow"])
    assert grew("putMessageSizeTotal") == grew("commitLogMaxOffset") > 0
    assert int(table["msgPutTotalTodayMorning"]) == 0, "no midnight has passed since start-up"
    assert 0 < int(table["earliestMessageTimeStamp"]) <= int(time.time() * 1000)
    assert table["brokerVersionDesc"].startswith("V4_9_")
    assert re.fullmatch(r"\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]", table["runtime"])
    assert re.fullmatch(r"Total : .+, Free : .+\.", table["commitLogDirCapacity"])
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:")


async def test_query_topic_consume_by_who(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "WhoTopic")
    await commit_offset(client, broker.addr, "cg_offline", "WhoTopic", 0, 0)
    hb = HeartbeatData(clientID="127.0.0.1@who", consumerDataSet=[ConsumerData(
        groupName="cg_online", subscriptionDataSet=[SubscriptionData(topic="WhoTopic")])])
    assert (await call(client, broker.addr, RequestCode.HEART_BEAT, None, hb.encode())).code == ResponseCode.SUCCESS
    r = await call(client, broker.addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "WhoTopic"})
    assert r.code == ResponseCode.SUCCESS
    body = json.loads(r.body)
    assert_fields(body, GROUP_LIST)
    assert sorted(body["groupList"]) == ["cg_offline", "cg_online"]
    r = await call(client, broker.addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "NobodysTopic"})
    assert json.loads(r.body) == {"groupList": []}
    r = await call(client, broker.addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {})
    assert r.code == ResponseCode.SYSTEM_ERROR and "topic" in (r.remark or "")


async def test_query_consume_queue(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "CqTopic")
    offsets = await sent_to_queue_0(client, broker.addr, "CqTopic", 5, "tagA")
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "0", "index": "1", "count": "3"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    body = json.loads(r.body)
    assert_fields(body, QUERY_CQ_BODY, QUERY_CQ_OPTIONAL)
    assert set(body) == {"maxQueueIndex", "minQueueIndex", "queueData"}
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 5)
    for unit in body["queueData"]:
        assert_fields(unit, CONSUME_QUEUE_DATA)
        assert unit["eval"] is False and unit["physicSize"] > 0
        assert unit["tagsCode"] == tags_string_to_tags_code("tagA")
    assert [u["physicOffset"] for u in body["queueData"]] == offsets[1:4]

    hb = HeartbeatData(clientID="127.0.0.1@cq", consumerDataSet=[ConsumerData(
        groupName="cg_cq", subscriptionDataSet=[SubscriptionData(topic="CqTopic", subString="tagA",
                                                                 tagsSet=["tagA"])])])
    assert (await call(client, broker.addr, RequestCode.HEART_BEAT, None, hb.encode())).code == ResponseCode.SUCCESS
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "0", "index": "0", "count": "10", "consumerGroup": "cg_cq"})
    body = json.loads(r.body)
    assert_fields(body, {**QUERY_CQ_BODY, **QUERY_CQ_OPTIONAL})
    assert_fields(body["subscriptionData"], SUBSCRIPTION_DATA)
    assert body["subscriptionData"]["subString"] == "tagA"
    assert body["filterData"] == "null", "a tag subscription has no filter data (Java writes null)"
    assert [u["physicOffset"] for u in body["queueData"]] == offsets

    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "0", "index": "0", "count": "1", "consumerGroup": "cg_gone"})
    assert json.loads(r.body)["filterData"] == "cg_gone@CqTopic is not online!"
    assert "subscriptionData" not in json.loads(r.body)

    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "0", "index": "2", "count": "0"})
    assert (r.code, r.remark, json.loads(r.body)["queueData"]) == (ResponseCode.SUCCESS, None, [])
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "0", "index": "99", "count": "1"})
    assert r.code == ResponseCode.SUCCESS and r.remark == "Index 99 of 0@CqTopic is not exist!"
    assert set(json.loads(r.body)) == {"maxQueueIndex", "minQueueIndex"}
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "7", "index": "0", "count": "1"})
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "7@CqTopic is not exist!"
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE,
                   {"topic": "CqTopic", "queueId": "x", "index": "0", "count": "1"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in (r.remark or "")


async def test_broker_consume_stats(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "StatsTopic")
    await sent_to_queue_0(client, broker.addr, "StatsTopic", 4, "a")
    r = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                   json.dumps({"groupName": "cg_stats"}).encode())
    assert r.code == ResponseCode.SUCCESS, r.remark
    await commit_offset(client, broker.addr, "cg_stats", "StatsTopic", 0, 1)
    # Online, subscribed elsewhere: its offsets on StatsTopic are left over, and left out.
    await commit_offset(client, broker.addr, "cg_stale", "StatsTopic", 0, 2)
    hb = HeartbeatData(clientID="127.0.0.1@stale", consumerDataSet=[ConsumerData(
        groupName="cg_stale", subscriptionDataSet=[SubscriptionData(topic="OtherTopic")])])
    assert (await call(client, broker.addr, RequestCode.HEART_BEAT, None, hb.encode())).code == ResponseCode.SUCCESS
    r = await call(client, broker.addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    body = loads_mq_keyed(r.body)
    assert_fields(body, CONSUME_STATS_LIST)
    assert body["brokerAddr"] == broker.addr
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in body["consumeStatsList"]:
        assert type(entry) is dict and len(entry) == 1
        groups.update(entry)
    assert "cg_stats" in groups
    assert groups["cg_stale"] == []
    r = await call(client, broker.addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "cg_stale",
                                                                         "topic": "StatsTopic"})
    assert loads_mq_keyed(r.body) == {"consumeTps": 0.0, "offsetTable": {}}
    (stats,) = groups["cg_stats"]
    assert_fields(stats, CONSUME_STATS)
    assert sorted(stats["offsetTable"]) == ["StatsTopic|broker-a|0", "StatsTopic|broker-a|1"]
    for wrapper in stats["offsetTable"].values():
        assert_fields(wrapper, OFFSET_WRAPPER)
    q0 = stats["offsetTable"]["StatsTopic|broker-a|0"]
    assert (q0["brokerOffset"], q0["consumerOffset"]) == (4, 1)
    assert q0["lastTimestamp"] > 0
    total = sum(w["brokerOffset"] - w["consumerOffset"] for per_group in groups.values() for s in per_group
                for w in s["offsetTable"].values())
    assert body["totalDiff"] == total
    assert sum(w["brokerOffset"] - w["consumerOffset"] for w in stats["offsetTable"].values()) == 3

    r = await call(client, broker.addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    ordered = loads_mq_keyed(r.body)["consumeStatsList"]
    assert {"cg_stats": []} in ordered, "StatsTopic is not an order topic"
    r = await call(client, broker.addr, RequestCode.GET_BROKER_CONSUME_STATS, {})
    assert r.code == ResponseCode.SYSTEM_ERROR and "isOrder" in (r.remark or "")
