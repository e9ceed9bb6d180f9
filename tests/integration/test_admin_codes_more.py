"""The rest of the admin codes Java 4.9.7's tools send a broker, over raw remoting: replies key by
key against the Java classes (docs/admin-codes.md), and what each request does to the broker."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol import json_body
from rocketmq_py.remoting.protocol.broker import encode_mq_keyed
from rocketmq_py.remoting.protocol.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rocketmq_py.remoting.protocol.message import TRANSACTION_PREPARED_TYPE, MessageConst
from tests.integration.broker_client import (
    call,
    commit_offset,
    create_topic,
    pull_request,
    send_request,
    sent_to_queue_0,
)
from tests.integration.daemons import Daemon, DaemonSet
from tests.integration.java_bodies import assert_fields, loads_mq_keyed

QUERY_CONSUME_TIME_SPAN_BODY = {"consumeTimeSpanSet": list}
QUEUE_TIME_SPAN = {"consumeTimeStamp": int, "consumeTimeStampStr": str, "delayTime": int, "maxTimeStamp": int,
                   "maxTimeStampStr": str, "messageQueue": dict, "minTimeStamp": int, "minTimeStampStr": str}
MESSAGE_QUEUE = {"brokerName": str, "queueId": int, "topic": str}
QUERY_CORRECTION_OFFSET_BODY = {"correctionOffsets": dict}
TOPIC_LIST = {"topicList": list}
PRODUCER_TABLE_INFO = {"data": dict}
PRODUCER_INFO = {"clientId": str, "language": str, "lastUpdateTimestamp": int, "remoteIP": str, "version": int}
GET_CONSUMER_STATUS_BODY = {"consumerTable": dict, "messageQueueTable": dict}
BROKER_STATS_DATA = {"statsDay": dict, "statsHour": dict, "statsMinute": dict}
BROKER_STATS_ITEM = {"avgpt": float, "sum": int, "tps": float}


async def _heartbeat(client: RemotingClient, broker: Daemon, client_id: str, *, group: str | None = None,
                     topic: str = "", producer_group: str | None = None) -> None:
    hb = HeartbeatData(
        clientID=client_id,
        consumerDataSet=[ConsumerData(groupName=group, subscriptionDataSet=[SubscriptionData(topic=topic)])]
        if group else [],
        producerDataSet=[ProducerData(groupName=producer_group)] if producer_group else [])
    r = await call(client, broker.addr, RequestCode.HEART_BEAT, None, hb.encode())
    assert r.code == ResponseCode.SUCCESS, r.remark


async def _max_offset(client: RemotingClient, broker: Daemon, topic: str, qid: int) -> int:
    r = await call(client, broker.addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
    return int(r.ext_fields["offset"])


async def test_consume_time_span(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "SpanTopic")
    before = int(time.time() * 1000)
    await sent_to_queue_0(client, broker.addr, "SpanTopic", 3, "a")
    await commit_offset(client, broker.addr, "cg_span", "SpanTopic", 0, 1)
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "SpanTopic", "group": "cg_span"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    body = json.loads(r.body)
    assert_fields(body, QUERY_CONSUME_TIME_SPAN_BODY)
    spans = {s["messageQueue"]["queueId"]: s for s in body["consumeTimeSpanSet"]}
    assert sorted(spans) == [0, 1]
    for span in spans.values():
        assert_fields(span, QUEUE_TIME_SPAN)
        assert_fields(span["messageQueue"], MESSAGE_QUEUE)
    q0 = spans[0]
    assert before <= q0["minTimeStamp"] <= q0["consumeTimeStamp"] <= q0["maxTimeStamp"] <= int(time.time() * 1000)
    assert q0["delayTime"] >= 0, "two messages wait behind the committed offset"
    assert q0["minTimeStampStr"][4] == "-" and "#" in q0["minTimeStampStr"]
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "NoSuchTopic", "group": "g"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_correction_offset_and_clone(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "CorrTopic")
    await sent_to_queue_0(client, broker.addr, "CorrTopic", 5, "a")
    await commit_offset(client, broker.addr, "cg_slow", "CorrTopic", 0, 2)
    await commit_offset(client, broker.addr, "cg_fast", "CorrTopic", 0, 4)
    await commit_offset(client, broker.addr, "cg_cmp", "CorrTopic", 0, 3)
    r = await call(client, broker.addr, RequestCode.QUERY_CORRECTION_OFFSET,
                   {"topic": "CorrTopic", "compareGroup": "cg_cmp", "filterGroups": "cg_cmp"})
    assert r.code == ResponseCode.SUCCESS
    assert b'"correctionOffsets":{0:' in r.body, "Integer map keys unquoted, as fastjson writes them"
    body = json_body.loads(r.body)
    assert_fields(body, QUERY_CORRECTION_OFFSET_BODY)
    assert body["correctionOffsets"] == {"0": 2}, "least of cg_slow and cg_fast, below cg_cmp's 3"
    r = await call(client, broker.addr, RequestCode.QUERY_CORRECTION_OFFSET,
                   {"topic": "CorrTopic", "compareGroup": "cg_cmp", "filterGroups": "cg_cmp,cg_slow"})
    assert json_body.loads(r.body)["correctionOffsets"] == {"0": 2**63 - 1}, "cg_fast is past cg_cmp"

    r = await call(client, broker.addr, RequestCode.CLONE_GROUP_OFFSET,
                   {"srcGroup": "cg_fast", "destGroup": "cg_clone", "topic": "CorrTopic", "offline": "true"})
    assert r.code == ResponseCode.SUCCESS
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUMER_OFFSET,
                   {"consumerGroup": "cg_clone", "topic": "CorrTopic", "queueId": "0"})
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "4")
    r = await call(client, broker.addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "cg_fast"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "destGroup" in (r.remark or "")


async def test_system_topics_and_cleanups_keep_live_data(module_broker: Daemon, client: RemotingClient
                                                         ) -> None:
    broker = module_broker
    r = await call(client, broker.addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    body = json.loads(r.body)
    assert_fields(body, TOPIC_LIST)
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "DefaultCluster", "broker-a"} <= \
        set(body["topicList"])

    await create_topic(client, broker.addr, "LiveTopic")
    await sent_to_queue_0(client, broker.addr, "LiveTopic", 2, "a")
    for code in (RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
                 RequestCode.DELETE_EXPIRED_COMMITLOG):
        assert (await call(client, broker.addr, code)).code == ResponseCode.SUCCESS
    assert await _max_offset(client, broker, "LiveTopic", 0) == 2, "configured, unexpired queues are kept"
    r = await client.invoke(broker.addr, pull_request("g", "LiveTopic", 0, 0), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_expired_commit_log_and_its_queues_deleted_on_request(daemons: DaemonSet, client: RemotingClient
                                                                    ) -> None:
    ns = daemons.namesrv()
    # 64 KiB CommitLog files kept for 0 hours; deleteWhen names no hour, so only a request deletes.
    broker = daemons.broker(ns.addr, "mappedFileSizeCommitLog=65536", "fileReservedTime=0", "deleteWhen=99")
    await create_topic(client, broker.addr, "OldTopic", 1)
    await create_topic(client, broker.addr, "NewTopic", 1)
    for _ in range(40):  # ~40 KiB: the first file
        r = await client.invoke(broker.addr, send_request("OldTopic", b"x" * 1000, queue_id=0), 5)
        assert r.code == ResponseCode.SUCCESS
    for _ in range(100):  # rolls into later files
        r = await client.invoke(broker.addr, send_request("NewTopic", b"y" * 1000, queue_id=0), 5)
        assert r.code == ResponseCode.SUCCESS
    info = json.loads((await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
    assert info["commitLogMinOffset"] == "0"
    assert (await call(client, broker.addr, RequestCode.DELETE_EXPIRED_COMMITLOG)).code == ResponseCode.SUCCESS
    info = json.loads((await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
    min_offset = int(info["commitLogMinOffset"])
    assert min_offset > 0 and min_offset % 65536 == 0
    assert int(info["earliestMessageTimeStamp"]) > 0

    cq = {"topic": "OldTopic", "queueId": "0", "index": "0", "count": "1"}
    assert (await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE, cq)).code == ResponseCode.SUCCESS
    assert (await call(client, broker.addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)).code == ResponseCode.SUCCESS
    r = await call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE, cq)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "0@OldTopic is not exist!"), \
        "every unit of OldTopic pointed into the deleted file"
    assert await _max_offset(client, broker, "NewTopic", 0) == 100


async def test_resume_check_half_message(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "TxTopic")
    request = send_request("TxTopic", b"half", group="pg_tx", queue_id=0, sys_flag=TRANSACTION_PREPARED_TYPE,
                           properties={MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: "pg_tx"})
    r = await client.invoke(broker.addr, request, 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    half_id = r.ext_fields["msgId"]
    before = await _max_offset(client, broker, "RMQ_SYS_TRANS_HALF_TOPIC", 0)
    r = await call(client, broker.addr, RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": half_id})
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert await _max_offset(client, broker, "RMQ_SYS_TRANS_HALF_TOPIC", 0) == before + 1
    r = await call(client, broker.addr, RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": "nonsense"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.")


async def test_all_producer_info(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    before = int(time.time() * 1000)
    await _heartbeat(client, broker, "127.0.0.1@prod", producer_group="pg_info")
    r = await call(client, broker.addr, RequestCode.GET_ALL_PRODUCER_INFO)
    assert r.code == ResponseCode.SUCCESS
    body = json.loads(r.body)
    assert_fields(body, PRODUCER_TABLE_INFO)
    (producer,) = body["data"]["pg_info"]
    assert_fields(producer, PRODUCER_INFO)
    assert producer["clientId"] == "127.0.0.1@prod" and producer["language"] == "PYTHON"
    assert producer["remoteIP"].startswith("127.0.0.1:")
    assert before - 1000 <= producer["lastUpdateTimestamp"] <= int(time.time() * 1000) + 1000


async def test_calls_forwarded_to_the_consumer(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    await create_topic(client, broker.addr, "FwdTopic")
    (offset,) = await sent_to_queue_0(client, broker.addr, "FwdTopic", 1, "a")
    seen: dict[int, RemotingCommand] = {}

    async def on_directly(conn: Any, req: RemotingCommand) -> RemotingCommand:
        seen[req.code] = req
        return req.response(body=b'{"consumeResult":"CR_SUCCESS","order":false,"autoCommit":true,"spentTimeMills":1}')

    async def on_status(conn: Any, req: RemotingCommand) -> RemotingCommand:
        seen[req.code] = req
        table = {("FwdTopic", "broker-a", 0): 1, ("FwdTopic", "broker-a", 1): 0}
        return req.response(body=encode_mq_keyed("messageQueueTable", table)[:-1] + b',"consumerTable":{}}')

    consumer = RemotingClient()
    consumer.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, on_directly)
    consumer.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, on_status)
    try:
        await _heartbeat(consumer, broker, "127.0.0.1@fwd", group="cg_fwd", topic="FwdTopic")
        msg_id = f"7F000001{broker.port:08X}{offset:016X}"
        r = await call(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                       {"consumerGroup": "cg_fwd", "clientId": "127.0.0.1@fwd", "msgId": msg_id})
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert json.loads(r.body)["consumeResult"] == "CR_SUCCESS"
        forwarded = seen[RequestCode.CONSUME_MESSAGE_DIRECTLY]
        assert forwarded.ext_fields["brokerName"] == "broker-a" and forwarded.ext_fields["msgId"] == msg_id
        viewed = await call(client, broker.addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        assert forwarded.body == viewed.body, "the consumer gets the stored record"
        r = await call(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                       {"consumerGroup": "cg_fwd", "clientId": "127.0.0.1@nobody", "msgId": msg_id})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <cg_fwd> <127.0.0.1@nobody> not online")

        r = await call(client, broker.addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                       {"topic": "FwdTopic", "group": "cg_fwd"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert seen[RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT].ext_fields == {"topic": "FwdTopic",
                                                                                "group": "cg_fwd"}
        body = loads_mq_keyed(r.body)
        assert_fields(body, GET_CONSUMER_STATUS_BODY)
        assert body == {"consumerTable": {"127.0.0.1@fwd": {"FwdTopic|broker-a|0": 1, "FwdTopic|broker-a|1": 0}},
                        "messageQueueTable": {}}
    finally:
        await consumer.close()
    r = await call(client, broker.addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                   {"topic": "FwdTopic", "group": "cg_nobody"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "No Any Consumer online in the consumer group: [cg_nobody]")


async def test_acl_requests_refused_with_a_reason(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    for code, answer in ((RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED),
                         (RequestCode.DELETE_ACL_CONFIG, ResponseCode.DELETE_ACL_CONFIG_FAILED),
                         (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                          ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED),
                         (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, ResponseCode.SYSTEM_ERROR),
                         (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, ResponseCode.SYSTEM_ERROR)):
        r = await call(client, broker.addr, code, {"accessKey": "rocketmq2"})
        assert (r.code, r.remark) == (answer, "ACL is not enabled on this broker (aclEnable=false)"), code


async def test_view_broker_stats_data(module_broker: Daemon, client: RemotingClient) -> None:
    broker = module_broker
    # The broker-wide items exist from the sampler's first tick at start-up.
    r = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                   {"statsName": "BROKER_PUT_NUMS", "statsKey": "DefaultCluster"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    body = json.loads(r.body)
    assert_fields(body, BROKER_STATS_DATA)
    for window in body.values():
        assert_fields(window, BROKER_STATS_ITEM)
        assert window["sum"] >= 0 and window["tps"] >= 0
    r = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                   {"statsName": "GROUP_GET_NUMS", "statsKey": "NoTopic@nogroup"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <GROUP_GET_NUMS> <NoTopic@nogroup> not exist")


_ADMIN_CODES = [RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, RequestCode.QUERY_CONSUME_QUEUE,
                RequestCode.GET_BROKER_CONSUME_STATS, RequestCode.QUERY_CONSUME_TIME_SPAN,
                RequestCode.QUERY_CORRECTION_OFFSET, RequestCode.CLONE_GROUP_OFFSET,
                RequestCode.CONSUME_MESSAGE_DIRECTLY, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                RequestCode.GET_ALL_PRODUCER_INFO, RequestCode.VIEW_BROKER_STATS_DATA,
                RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, RequestCode.RESUME_CHECK_HALF_MESSAGE,
                RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG]
_FIELD_NAMES = ["topic", "queueId", "index", "count", "consumerGroup", "isOrder", "group", "compareGroup",
                "filterGroups", "srcGroup", "destGroup", "offline", "msgId", "clientId", "clientAddr", "statsName",
                "statsKey"]
_values = st.one_of(st.text(max_size=12), st.integers().map(str), st.sampled_from(["BadTopic", "-1", "99999999999",
                                                                                     "true", "", "BadTopic@g"]))


@settings(max_examples=80, deadline=None)
@given(code=st.sampled_from(_ADMIN_CODES), fields=st.dictionaries(st.sampled_from(_FIELD_NAMES), _values),
       body=st.one_of(st.none(), st.binary(max_size=16)))
def test_any_admin_request_is_answered_and_changes_nothing(module_broker: Daemon, code: int,
                                                           fields: dict[str, str], body: bytes | None) -> None:
    async def ask() -> tuple[RemotingCommand, int]:
        c = RemotingClient()
        try:
            await create_topic(c, module_broker.addr, "BadTopic", 1)
            r = await call(c, module_broker.addr, code, fields, body)
            return r, await _max_offset(c, module_broker, "BadTopic", 0)
        finally:
            await c.close()

    answer, max_offset = asyncio.run(ask())
    assert answer.code == ResponseCode.SUCCESS or answer.remark, (code, fields, answer)
    assert max_offset == 0, "no admin request stores a message in another topic"
    assert module_broker.alive()
