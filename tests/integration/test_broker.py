"""A real mqbroker (with a real mqnamesrv) driven over the wire, as RocketMQ clients drive it."""

from __future__ import annotations

import asyncio
import json
import os
import time

from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.message import decode_offset_msg_id, decode_records
from tests.integration.broker_client import batch_request, call, pull_request, send_request, wait_held_pulls
from tests.integration.daemons import Daemon, DaemonSet
from tests.waiting import wait_until

# The settings of the broker of the shared ``cluster`` fixture (tests/integration/conftest.py).
BROKER_OPTIONS = ("channelExpiredTimeout=120000",)


async def route_of(client: RemotingClient, ns: str, topic: str) -> RemotingCommand:
    return await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def test_send_v1_v2_batch_and_pull_in_order(cluster: tuple[Daemon, Daemon], client: RemotingClient) -> None:
    _, broker = cluster
    sent = []
    for i in range(6):
        r = await client.invoke(broker.addr, send_request("Orders", f"m{i}".encode(), tags="TagA" if i % 2 else "TagB",
                                                          queue_id=0, v2=i % 2 == 0, keys=f"key{i}"), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "0" and r.ext_fields["queueOffset"] == str(i)
        assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and r.ext_fields["TRACE_ON"] == "true"
        host, _ = decode_offset_msg_id(r.ext_fields["msgId"])
        assert host == ("127.0.0.1", broker.port), "the offset id carries the advertised address"
        sent.append(f"m{i}".encode())
    batch = await client.invoke(broker.addr, batch_request("Orders", [b"b0", b"b1", b"b2"]), 5)
    assert batch.code == ResponseCode.SUCCESS and len(batch.ext_fields["msgId"].split(",")) == 3
    assert batch.ext_fields["queueOffset"] == "6"
    pulled = await client.invoke(broker.addr, pull_request("cg", "Orders", 0, 0), 5)
    assert pulled.code == ResponseCode.SUCCESS
    msgs = list(decode_records(pulled.body))
    assert [m.body for m in msgs] == [*sent, b"b0", b"b1", b"b2"]
    assert [m.queue_offset for m in msgs] == list(range(9))
    assert pulled.ext_fields["nextBeginOffset"] == "9" and pulled.ext_fields["maxOffset"] == "9"
    assert msgs[0].properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in msgs[0].properties
    assert [m.properties for m in msgs[6:]] == [{"KEYS": f"batch-{i}", "CLUSTER": "DefaultCluster"} for i in range(3)]
    # Each entry keeps its own properties; the header's fill in what an entry lacks; CLUSTER is the broker's.
    tagged = await client.invoke(broker.addr, batch_request("Orders", [b"t0", b"t1", b"t2"], entry_properties=[
        "TAGS\x01TagA", "TAGS\x01TagB\x02CLUSTER\x01spoofed", ""], header_properties="WAIT\x01true\x02TAGS\x01TagC"), 5)
    assert tagged.code == ResponseCode.SUCCESS and tagged.ext_fields["queueOffset"] == "9"
    tagged_msgs = list(decode_records((await client.invoke(broker.addr, pull_request("cg", "Orders", 0, 9), 5)).body))
    assert [m.properties for m in tagged_msgs] == [{"TAGS": "TagA", "CLUSTER": "DefaultCluster"},
                                                   {"TAGS": "TagB", "CLUSTER": "DefaultCluster"},
                                                   {"TAGS": "TagC", "CLUSTER": "DefaultCluster"}]
    only_a = await client.invoke(broker.addr, pull_request("cg", "Orders", 0, 0, subscription="TagA"), 5)
    assert [m.body for m in decode_records(only_a.body)] == [b"m1", b"m3", b"m5", b"t0"]
    caught_up = await client.invoke(broker.addr, pull_request("cg", "Orders", 0, 12), 5)
    assert caught_up.code == ResponseCode.PULL_NOT_FOUND
    moved = await client.invoke(broker.addr, pull_request("cg", "Orders", 0, 50), 5)
    # Java's rule for an offset past the end: back to the min offset while it is 0, else the max.
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "0"


async def test_the_largest_messages_are_stored_whole_and_a_larger_one_refused(cluster: tuple[Daemon, Daemon],
                                                                            client: RemotingClient) -> None:
    """Bodies up to maxMessageSize (4 MiB), sent together so their frames' reads interleave with
    each other's answers, are stored and pulled back byte for byte; 4 MiB and one byte is refused
    with MESSAGE_ILLEGAL and stores nothing."""
    _, broker = cluster
    largest = 4 * 1024 * 1024
    bodies = [os.urandom(n) for n in (largest, 1 << 20, 64 * 1024 + 1, largest)]
    sent = await asyncio.gather(*(client.invoke(broker.addr, send_request("Large", body, queue_id=0), 10)
                                  for body in bodies))
    assert [r.code for r in sent] == [ResponseCode.SUCCESS] * len(bodies), [r.remark for r in sent]
    refused = await client.invoke(broker.addr, send_request("Large", os.urandom(largest + 1), queue_id=0), 10)
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    by_offset = {int(r.ext_fields["queueOffset"]): body for r, body in zip(sent, bodies, strict=True)}
    assert sorted(by_offset) == list(range(len(bodies)))
    for offset, body in by_offset.items():
        pulled = await client.invoke(broker.addr, pull_request("cg-large", "Large", 0, offset, max_nums=1), 10)
        assert pulled.code == ResponseCode.SUCCESS
        (msg,) = decode_records(pulled.body)
        assert msg.queue_offset == offset and msg.body == body
    after = await client.invoke(broker.addr, pull_request("cg-large", "Large", 0, len(bodies)), 5)
    assert after.code == ResponseCode.PULL_NOT_FOUND, "the refused body stored nothing"


async def test_auto_created_topic_is_routable_at_once(cluster: tuple[Daemon, Daemon], client: RemotingClient) -> None:
    ns, broker = cluster
    assert (await route_of(client, ns.addr, "Fresh")).code == ResponseCode.TOPIC_NOT_EXIST
    tbw = await route_of(client, ns.addr, "TBW102")
    assert tbw.code == ResponseCode.SUCCESS, "the auto-create template must be routable"
    r = await client.invoke(broker.addr, send_request("Fresh", b"x"), 5)
    assert r.code == ResponseCode.SUCCESS
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        route = await route_of(client, ns.addr, "Fresh")
        if route.code == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.05)
    assert route.code == ResponseCode.SUCCESS, "registration after a topic change must not wait 30 s"
    qd = json.loads(route.body)["queueDatas"][0]
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (4, 4, 6)


def _size(path: str) -> int:
    """The size of a file (a directory's own), -1 when there is none."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return -1


async def test_a_created_topic_has_its_queue_files_before_its_first_message(cluster: tuple[Daemon, Daemon],
                                                                            client: RemotingClient) -> None:
    """UPDATE_AND_CREATE_TOPIC has the allocator make the first ConsumeQueue file of each write
    queue, which the first sends take (docs/latency.md); DELETE_TOPIC_IN_BROKER removes them."""
    _, broker = cluster
    queues = os.path.join(broker.home, "store", "consumequeue", "MadeAhead")
    files = [os.path.join(queues, str(q), f"{0:020d}") for q in range(3)]
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
               {"topic": "MadeAhead", "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3",
                "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert await wait_until(lambda: all(_size(f) == 6_000_000 for f in files), 10.0)
    for q in range(3):
        sent = await client.invoke(broker.addr, send_request("MadeAhead", f"m{q}".encode(), queue_id=q), 5)
        assert sent.code == ResponseCode.SUCCESS
        pulled = await client.invoke(broker.addr, pull_request("made_ahead_group", "MadeAhead", q, 0), 5)
        assert pulled.code == ResponseCode.SUCCESS and len(list(decode_records(pulled.body or b""))) == 1
    assert all(_size(os.path.join(queues, str(q))) >= 0 for q in range(3)) and _size(os.path.join(queues, "3")) < 0
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
               {"topic": "NeverSent", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
                "perm": "6", "topicFilterType": "SINGLE_TAG"})
    await call(client, broker.addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "NeverSent"})
    never = os.path.join(broker.home, "store", "consumequeue", "NeverSent")
    assert await wait_until(lambda: _size(never) < 0, 10.0)


async def test_long_poll_answered_within_100ms_of_a_send(cluster: tuple[Daemon, Daemon],
                                                        client: RemotingClient) -> None:
    _, broker = cluster
    await client.invoke(broker.addr, send_request("Poll", b"first", queue_id=1), 5)
    producer = RemotingClient()
    try:
        held = asyncio.ensure_future(client.invoke(broker.addr, pull_request("cg", "Poll", 1, 1, suspend_ms=10000), 15))
        await wait_held_pulls(producer, broker.addr, 1)  # parked: what is measured comes after
        assert not held.done(), "a pull that found nothing must be held"
        sent_at = time.monotonic()
        await producer.invoke(broker.addr, send_request("Poll", b"second", queue_id=1), 5)
        response = await asyncio.wait_for(held, 5)
        latency = time.monotonic() - sent_at
        assert response.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(response.body)] == [b"second"]
        assert latency < 0.1, f"held pull answered {latency * 1000:.0f} ms after the send"
        # A short suspend with nothing arriving ends in PULL_NOT_FOUND at its deadline.
        start = time.monotonic()
        empty = await client.invoke(broker.addr, pull_request("cg", "Poll", 1, 2, suspend_ms=300), 5)
        assert empty.code == ResponseCode.PULL_NOT_FOUND and 0.25 < time.monotonic() - start < 2
        # A batch wakes a pull that only its middle entry satisfies: each entry is announced.
        tagged = asyncio.ensure_future(client.invoke(broker.addr, pull_request(
            "cg", "Poll", 1, 2, suspend_ms=10000, subscription="TagB"), 15))
        await wait_held_pulls(producer, broker.addr, 1)
        assert not tagged.done()
        sent_at = time.monotonic()
        batch = await producer.invoke(broker.addr, batch_request("Poll", [b"t0", b"t1", b"t2"], queue_id=1,
                                                                entry_properties=["TAGS\x01TagA", "TAGS\x01TagB",
                                                                                  "TAGS\x01TagA"]), 5)
        assert batch.code == ResponseCode.SUCCESS
        response = await asyncio.wait_for(tagged, 5)
        latency = time.monotonic() - sent_at
        assert [m.body for m in decode_records(response.body)] == [b"t1"]
        assert latency < 0.1, f"held pull answered {latency * 1000:.0f} ms after the batch"
    finally:
        await producer.close()


async def test_offsets_committed_queried_and_persisted(daemons: DaemonSet, client: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "flushConsumerOffsetInterval=200")
    for i in range(5):
        await client.invoke(broker.addr, send_request("Off", f"o{i}".encode(), queue_id=0), 5)
    q = {"consumerGroup": "cg", "topic": "Off", "queueId": "0"}
    first = await call(client, broker.addr, RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert first.code == ResponseCode.SUCCESS and first.ext_fields["offset"] == "0", "young queue: from 0"
    await call(client, broker.addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "3"})
    await client.invoke(broker.addr, pull_request("cg", "Off", 0, 3, commit_offset=4), 5)
    assert (await call(client, broker.addr, RequestCode.QUERY_CONSUMER_OFFSET, q)).ext_fields["offset"] == "4"
    assert (await call(client, broker.addr, RequestCode.GET_MAX_OFFSET,
                       {"topic": "Off", "queueId": "0"})).ext_fields["offset"] == "5"
    assert broker.stop() == 0
    broker = daemons.broker(ns.addr)  # the same home: broker-a's
    assert (await call(client, broker.addr, RequestCode.QUERY_CONSUMER_OFFSET, q)).ext_fields["offset"] == "4"
    pulled = await client.invoke(broker.addr, pull_request("cg", "Off", 0, 0), 5)
    assert [m.body for m in decode_records(pulled.body)] == [f"o{i}".encode() for i in range(5)]
    topics = await call(client, broker.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert "Off" in json.loads(topics.body)["topicConfigTable"], "topics survive a restart"


async def test_sigkill_loses_no_acknowledged_message(daemons: DaemonSet, client: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    acked = []
    for i in range(200):
        r = await client.invoke(broker.addr, send_request("Kill", f"k{i}".encode(), queue_id=i % 2), 5)
        assert r.code == ResponseCode.SUCCESS
        acked.append((i % 2, int(r.ext_fields["queueOffset"]), f"k{i}".encode()))
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
               b'{"groupName":"kept_group","retryMaxTimes":3}')
    broker.kill()
    broker = daemons.broker(ns.addr)  # the same home: broker-a's
    for qid in (0, 1):
        pulled = await client.invoke(broker.addr, pull_request("cg", "Kill", qid, 0, max_nums=200), 5)
        # The topic a send created is written before the send is answered (the kill came after).
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        got = [m.body for m in decode_records(pulled.body)]
        assert got == [b for q, _, b in acked if q == qid][: len(got)]
        total = int(pulled.ext_fields["maxOffset"])
        assert total == sum(1 for q, _, _ in acked if q == qid)
    groups = await call(client, broker.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert json.loads(groups.body)["subscriptionGroupTable"]["kept_group"]["retryMaxTimes"] == 3


async def test_consumer_membership_change_is_notified(cluster: tuple[Daemon, Daemon]) -> None:
    from rocketmq_py.remoting.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData

    _, broker = cluster
    notified: asyncio.Queue[str] = asyncio.Queue()

    async def on_notify(conn, req):  # type: ignore[no-untyped-def]
        await notified.put(req.ext_fields["consumerGroup"])

    stay, leave = RemotingClient(), RemotingClient()
    stay.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    try:
        for c, cid in ((stay, "10.0.0.1@stay"), (leave, "10.0.0.2@leave")):
            hb = HeartbeatData(clientID=cid, consumerDataSet=[ConsumerData(
                groupName="cg_members", subscriptionDataSet=[SubscriptionData(topic="Members")])])
            assert (await c.invoke(broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, hb.encode()),
                                   5)).code == ResponseCode.SUCCESS
        ids = await call(stay, broker.addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg_members"})
        assert sorted(json.loads(ids.body)["consumerIdList"]) == ["10.0.0.1@stay", "10.0.0.2@leave"]
        while not notified.empty():
            notified.get_nowait()
        await leave.close()
        assert await asyncio.wait_for(notified.get(), 5) == "cg_members"
        ids = await call(stay, broker.addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg_members"})
        assert json.loads(ids.body)["consumerIdList"] == ["10.0.0.1@stay"]
        retry = await call(stay, broker.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert "%RETRY%cg_members" in json.loads(retry.body)["topicConfigTable"], "heartbeat creates the retry topic"
    finally:
        await stay.close()


async def test_queue_locks(cluster: tuple[Daemon, Daemon], client: RemotingClient) -> None:
    _, broker = cluster

    def body(cid: str) -> bytes:
        return json.dumps({"clientId": cid, "consumerGroup": "og",
                           "mqSet": [{"brokerName": "broker-a", "queueId": 0, "topic": "O"}]}).encode()

    a = await call(client, broker.addr, RequestCode.LOCK_BATCH_MQ, None, body("A"))
    assert len(json.loads(a.body)["lockOKMQSet"]) == 1
    b = await call(client, broker.addr, RequestCode.LOCK_BATCH_MQ, None, body("B"))
    assert json.loads(b.body)["lockOKMQSet"] == [], "B cannot take A's queue"
    await call(client, broker.addr, RequestCode.UNLOCK_BATCH_MQ, None, body("A"))
    b = await call(client, broker.addr, RequestCode.LOCK_BATCH_MQ, None, body("B"))
    assert len(json.loads(b.body)["lockOKMQSet"]) == 1


async def test_bad_input_gets_clear_errors_and_changes_nothing(daemons: DaemonSet, client: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "autoCreateTopicEnable=false", "maxMessageSize=1024",
                            "autoCreateSubscriptionGroup=false")
    no_topic = await client.invoke(broker.addr, send_request("NoSuchTopic", b"x"), 5)
    assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST and "not exist" in no_topic.remark
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
               {"topic": "Small", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
                "perm": "6", "topicFilterType": "SINGLE_TAG"})
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
               {"topic": "ReadOnly", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                "perm": "4", "topicFilterType": "SINGLE_TAG"})
    big = await client.invoke(broker.addr, send_request("Small", b"x" * 2048), 5)
    assert big.code == ResponseCode.MESSAGE_ILLEGAL
    bad_queue = await client.invoke(broker.addr, send_request("Small", b"x", queue_id=7), 5)
    assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[7] is illegal" in bad_queue.remark
    read_only = await client.invoke(broker.addr, send_request("ReadOnly", b"x"), 5)
    assert read_only.code == ResponseCode.NO_PERMISSION
    bad_name = await client.invoke(broker.addr, send_request("bad topic!", b"x"), 5)
    assert bad_name.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in bad_name.remark
    system = await client.invoke(broker.addr, send_request("SCHEDULE_TOPIC_XXXX", b"x"), 5)
    assert system.code == ResponseCode.NO_PERMISSION
    unknown_group = await client.invoke(broker.addr, pull_request("nobody", "Small", 0, 0), 5)
    assert unknown_group.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    no_header = await call(client, broker.addr, RequestCode.SEND_MESSAGE_V2, {"a": "pg"}, b"x")
    assert no_header.code == ResponseCode.SYSTEM_ERROR and "is null" in no_header.remark
    unknown = await call(client, broker.addr, 4242)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    # Batches: each refused whole, with its reason.
    truncated = batch_request("Small", [b"a", b"b"])
    truncated.body = truncated.body[:-3]  # type: ignore[index]
    not_utf8 = batch_request("Small", [b"a"], entry_properties=["P\x01@@"])
    not_utf8.body = not_utf8.body.replace(b"@@", b"\xff\xfe")  # type: ignore[union-attr]
    empty = batch_request("Small", [])
    for request, remark in ((truncated, "malformed"), (not_utf8, "not UTF-8"), (empty, "empty"),
                            (batch_request("Small", [b"a", b"b"], entry_properties=["", "DELAY\x013"]), "delayed"),
                            (batch_request("Small", [b"a", b"x" * 2048]), "size"),
                            (batch_request("%RETRY%g", [b"a"]), "retry group")):
        r = await client.invoke(broker.addr, request, 5)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and remark in r.remark, (remark, r.remark)
    for qid in (0, 1):
        r = await call(client, broker.addr, RequestCode.GET_MAX_OFFSET, {"topic": "Small", "queueId": str(qid)})
        assert r.ext_fields["offset"] == "0", "nothing was stored"
    assert broker.alive()
    ok = await client.invoke(broker.addr, send_request("Small", b"fine"), 5)
    assert ok.code == ResponseCode.SUCCESS
