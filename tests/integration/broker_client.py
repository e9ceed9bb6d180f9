"""Raw remoting calls a RocketMQ client makes to a broker, for tests that drive one over the wire."""

from __future__ import annotations

import json
import time

from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.broker import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketmq_py.remoting.protocol.message import BatchEntry, MessageConst, encode_batch, properties_to_string
from tests.store_helpers import message_properties
from tests.waiting import wait_for_async


def send_request(topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None, queue_id: int = -1,
                 v2: bool = True, uniq: str | None = None, group: str = "test_producer",
                 properties: dict[str, str] | None = None, sys_flag: int = 0) -> RemotingCommand:
    props = message_properties(tags, keys, uniq, {MessageConst.WAIT_STORE_MSG_OK: "true", **(properties or {})})
    v1 = SendMessageRequestHeader(producerGroup=group, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
                                  queueId=queue_id, sysFlag=sys_flag, bornTimestamp=int(time.time() * 1000),
                                  flag=0, properties=properties_to_string(props), reconsumeTimes=0)
    if v2:
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(v1), body)
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, v1, body)


def batch_request(topic: str, bodies: list[bytes], queue_id: int = 0, entry_properties: list[str] | None = None,
                  header_properties: str = "WAIT\x01true") -> RemotingCommand:
    v1 = SendMessageRequestHeader(producerGroup="test_producer", topic=topic, defaultTopic="TBW102",
                                  defaultTopicQueueNums=4, queueId=queue_id, sysFlag=0,
                                  bornTimestamp=int(time.time() * 1000), flag=0, properties=header_properties,
                                  batch=True)
    props = entry_properties or [f"KEYS\x01batch-{i}" for i in range(len(bodies))]
    body = encode_batch([BatchEntry(0, b, p) for b, p in zip(bodies, props, strict=True)])
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, SendMessageRequestHeaderV2.from_v1(v1), body)


def pull_request(group: str, topic: str, queue_id: int, offset: int, *, subscription: str = "*",
                 suspend_ms: int = 0, commit_offset: int | None = None, max_nums: int = 32) -> RemotingCommand:
    flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0) | (FLAG_COMMIT_OFFSET if commit_offset else 0)
    header = PullMessageRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset,
                                      maxMsgNums=max_nums, sysFlag=flag, commitOffset=commit_offset or 0,
                                      suspendTimeoutMillis=suspend_ms, subVersion=0, subscription=subscription,
                                      expressionType="TAG")
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header)


async def call(client: RemotingClient, addr: str, code: int, header: dict[str, str] | None = None,
               body: bytes | None = None, timeout: float = 5.0) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, header, body), timeout)


async def held_pulls(client: RemotingClient, broker: str) -> int:
    """How many long polls ``broker`` holds now (``pullRequestHoldCount`` of its runtime info)."""
    info = await call(client, broker, RequestCode.GET_BROKER_RUNTIME_INFO)
    return int(json.loads(info.body)["table"]["pullRequestHoldCount"])


async def wait_held_pulls(client: RemotingClient, broker: str, count: int, timeout: float = 5.0) -> None:
    """Until ``broker`` holds ``count`` long polls; AssertionError after ``timeout``."""
    async def parked() -> bool:
        return await held_pulls(client, broker) == count
    assert await wait_for_async(parked, timeout, 0.02), f"the broker did not come to hold {count} pull(s)"


async def wait_for_route(ns: str, topic: str, timeout: float = 5.0) -> None:
    """Until the NameServer routes ``topic`` (a broker registers a new topic right after creating
    it, so this is short); AssertionError after ``timeout``."""
    client = RemotingClient()
    try:
        async def routed() -> bool:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            return (await client.invoke(ns, request, 3)).code == ResponseCode.SUCCESS

        if not await wait_for_async(routed, timeout, 0.05):
            raise AssertionError(f"no route for {topic} within {timeout}s")
    finally:
        await client.close()


async def sent_to_queue_0(client: RemotingClient, addr: str, topic: str, count: int, tags: str) -> list[int]:
    """The CommitLog offsets of ``count`` messages sent to queue 0 of ``topic``."""
    offsets = []
    for i in range(count):
        r = await client.invoke(addr, send_request(topic, f"m{i}".encode(), tags=tags, queue_id=0), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        offsets.append(int(r.ext_fields["msgId"][-16:], 16))
    return offsets


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 2) -> None:
    r = await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert r.code == ResponseCode.SUCCESS, r.remark


async def commit_offset(client: RemotingClient, addr: str, group: str, topic: str, qid: int, offset: int) -> None:
    r = await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": str(qid), "commitOffset": str(offset)})
    assert r.code == ResponseCode.SUCCESS, r.remark
