"""Tag and SQL92 filtering against real daemons, with push and lite-pull consumers.

Every topic's last message on each queue is a "sentinel" that every subscription here selects:
once a consumer has the sentinels of all queues, it has been handed everything the broker would
ever give it for that topic, so "exactly the matching messages" is checked without timing.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketmq_py.client import Message, MessageSelector, MQBrokerError, Producer
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.broker import FLAG_SUBSCRIPTION, FLAG_SUSPEND, PullMessageRequestHeader
from rocketmq_py.remoting.protocol.heartbeat import (
    CheckClientRequestBody,
    ConsumeFromWhere,
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
)
from rocketmq_py.remoting.protocol.message import MessageExt, decode_records
from tests.integration.broker_client import wait_for_route
from tests.integration.daemons import Daemon, DaemonSet
from tests.waiting import wait_until

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
QUEUES = 4


# The settings of the broker of the shared ``cluster`` fixture (tests/integration/conftest.py).
BROKER_OPTIONS = ("enablePropertyFilter=true",)


async def produce(ns: str, topic: str, messages: list[Message]) -> None:
    """Round-robin over the topic's queues, then one sentinel per queue; waits for the route."""
    async with Producer("pg_filter", ns) as p:
        queues = await p.fetch_publish_message_queues(topic)
        assert len(queues) == QUEUES
        for i, m in enumerate(messages):
            await p.send(m, queue=queues[i % QUEUES])
        for q in queues:
            await p.send(Message(topic, f"sentinel-{q.queue_id}".encode(), tags="S",
                                 properties={"a": "1000", "region": "eu", "sentinel": "1"}), queue=q)
    await wait_for_route(ns, topic)


def sql_messages(topic: str) -> tuple[list[Message], set[bytes]]:
    """40 messages over a, region; some without a or region. Returns them and the bodies
    ``a > 5 AND region IN ('eu','us')`` selects."""
    regions = ["eu", "us", "cn", None]
    msgs, want = [], set()
    for i in range(40):
        props: dict[str, str] = {}
        if i % 7 != 3:
            props["a"] = str(i)
        region = regions[i % 4]
        if region:
            props["region"] = region
        body = f"m{i}".encode()
        msgs.append(Message(topic, body, tags="T", properties=props))
        if "a" in props and i > 5 and region in ("eu", "us"):
            want.add(body)
    return msgs, want


def tag_messages(topic: str) -> tuple[list[Message], set[bytes]]:
    """Tags Aa and BB share a Java hash (2112): the broker lets BB through, the client drops it."""
    tags = ["Aa", "BB", "C", "D", None]
    msgs, want = [], set()
    for i in range(40):
        tag = tags[i % len(tags)]
        body = f"t{i}".encode()
        msgs.append(Message(topic, body, tags=tag))
        if tag in ("Aa", "C"):
            want.add(body)
    return msgs, want


SENTINELS = {f"sentinel-{q}".encode() for q in range(QUEUES)}


async def consume_push(ns: str, group: str, topic: str, selector: MessageSelector | str) -> list[bytes]:
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(group, ns, consume_from_where=FIRST, rebalance_interval=60)
    c.subscribe(topic, selector)
    c.register_message_listener(listener)
    await c.start()
    try:
        assert await wait_until(lambda: SENTINELS <= set(seen), 20), f"sentinels missing: {sorted(seen)}"
        # Everything pulled before the sentinels is already handed to consuming tasks: let them finish.
        assert await wait_until(lambda: not c._consuming, 10)
    finally:
        await c.shutdown()
    return seen


async def consume_lite(ns: str, group: str, topic: str, selector: MessageSelector | str) -> list[bytes]:
    seen: list[bytes] = []
    c = LitePullConsumer(group, ns, consume_from_where=FIRST, rebalance_interval=60)
    c.subscribe(topic, selector)
    await c.start()
    try:
        deadline = time.monotonic() + 20
        while not SENTINELS <= set(seen) and time.monotonic() < deadline:
            seen.extend(m.body for m in await c.poll(0.5))
        # Per queue, batches come in order: the sentinel is the last thing any queue can give.
    finally:
        await c.shutdown()
    assert SENTINELS <= set(seen), f"sentinels missing: {sorted(seen)}"
    return seen


@pytest.mark.parametrize("consume", [consume_push, consume_lite], ids=["push", "lite_pull"])
async def test_sql92_subscription_receives_exactly_the_matching_messages(
        cluster: tuple[Daemon, Daemon], consume) -> None:  # type: ignore[no-untyped-def]
    ns = cluster[0].addr
    topic = f"SqlTopic_{consume.__name__}"
    msgs, want = sql_messages(topic)
    await produce(ns, topic, msgs)
    seen = await consume(ns, f"cg_sql_{consume.__name__}", topic,
                         MessageSelector.by_sql("a > 5 AND region IN ('eu','us')"))
    assert sorted(seen) == sorted(want | SENTINELS), "each matching message once, nothing else"


@pytest.mark.parametrize("consume", [consume_push, consume_lite], ids=["push", "lite_pull"])
async def test_tag_subscription_receives_exactly_those_tags(
        cluster: tuple[Daemon, Daemon], consume) -> None:  # type: ignore[no-untyped-def]
    ns = cluster[0].addr
    topic = f"TagTopic_{consume.__name__}"
    msgs, want = tag_messages(topic)
    await produce(ns, topic, msgs)
    seen = await consume(ns, f"cg_tag_{consume.__name__}", topic, MessageSelector.by_tag("Aa || C || S"))
    assert sorted(seen) == sorted(want | SENTINELS), "Aa and C only: not BB (same hash as Aa), not D, not untagged"
    # the plain string form is the same subscription
    seen = await consume(ns, f"cg_tag2_{consume.__name__}", topic, " Aa||C ||S ")
    assert sorted(seen) == sorted(want | SENTINELS)


async def test_sql92_more_operators(cluster: tuple[Daemon, Daemon]) -> None:
    """BETWEEN, IS NULL, NOT, OR and string equality through the broker."""
    ns = cluster[0].addr
    topic = "SqlOperators"
    msgs, _ = sql_messages(topic)
    await produce(ns, topic, msgs)
    sql = "(a BETWEEN 10 AND 20 AND NOT (region = 'cn')) OR (a IS NULL AND region = 'us') OR sentinel = '1'"
    want = set()
    for m in msgs:
        a, region = m.properties.get("a"), m.properties.get("region")
        if (a is not None and 10 <= int(a) <= 20 and region is not None and region != "cn") or (
                a is None and region == "us"):
            want.add(m.body)
    assert want, "the data must exercise the expression"
    seen = await consume_lite(ns, "cg_sql_ops", topic, MessageSelector.by_sql(sql))
    assert sorted(seen) == sorted(want | SENTINELS)


def sql_pull(group: str, topic: str, queue_id: int, offset: int, sql: str,
             expression_type: str = "SQL92", suspend_ms: int = 0) -> RemotingCommand:
    header = PullMessageRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset,
                                      maxMsgNums=32, sysFlag=FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0),
                                      commitOffset=0, suspendTimeoutMillis=suspend_ms, subVersion=0,
                                      subscription=sql, expressionType=expression_type)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header)


async def test_raw_pull_filters_and_moves_past_unmatched(cluster: tuple[Daemon, Daemon],
                                                         client: RemotingClient) -> None:
    ns, broker = cluster[0].addr, cluster[1].addr
    topic = "SqlRawPull"
    await produce(ns, topic, [Message(topic, f"r{i}".encode(), properties={"a": str(i)}) for i in range(8)])
    # queue 0 holds a=0 and a=4, then the sentinel (a=1000)
    r = await client.invoke(broker, sql_pull("cg_raw", topic, 0, 0, "a = 4"), 5)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(r.body or b"")] == [b"r4"]
    assert int(r.ext_fields["nextBeginOffset"]) == 3, "the scan moved past every unit it looked at"
    r = await client.invoke(broker, sql_pull("cg_raw", topic, 0, 0, "a = 99"), 5)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY, r.remark  # NO_MATCHED_MESSAGE
    assert r.remark == "NO_MATCHED_MESSAGE"
    assert int(r.ext_fields["nextBeginOffset"]) == 3, "none matched: the next offset still moves on"
    r = await client.invoke(broker, sql_pull("cg_raw", topic, 0, 0, "a = "), 5)
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "parse the consumer's subscription failed" in (r.remark or "")
    assert "Invalid MessageSelector" in (r.remark or "")
    r = await client.invoke(broker, sql_pull("cg_raw", topic, 0, 0, "a = 4", "XPATH"), 5)
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "XPATH" in (r.remark or "")
    # a TAG pull of the same queue is untouched by any of this
    r = await client.invoke(broker, sql_pull("cg_raw", topic, 0, 0, "*", "TAG"), 5)
    assert [m.body for m in decode_records(r.body or b"")] == [b"r0", b"r4", b"sentinel-0"]


async def test_held_sql_pull_wakes_only_for_a_matching_message(cluster: tuple[Daemon, Daemon],
                                                                client: RemotingClient) -> None:
    ns, broker = cluster[0].addr, cluster[1].addr
    topic = "SqlHeld"
    await produce(ns, topic, [])  # the topic and its sentinels; queue 0 ends at offset 1
    held = asyncio.ensure_future(client.invoke(broker, sql_pull("cg_held", topic, 0, 1, "a = 7", suspend_ms=10_000),
                                               15))
    async with Producer("pg_filter", ns) as p:
        q0 = next(q for q in await p.fetch_publish_message_queues(topic) if q.queue_id == 0)
        await p.send(Message(topic, b"no", properties={"a": "1"}), queue=q0)
        # A wake answers within milliseconds of the dispatch; half a second of nothing is the proof.
        assert not await wait_until(held.done, 0.5), "a message the selector refuses leaves the pull parked"
        await p.send(Message(topic, b"yes", properties={"a": "7"}), queue=q0)
    r = await asyncio.wait_for(held, 5)
    assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_records(r.body or b"")] == [b"yes"]


def check_client_config(sql: str, expression_type: str = "SQL92") -> RemotingCommand:
    body = CheckClientRequestBody(clientId="127.0.0.1@test", group="cg_check", subscriptionData=SubscriptionData(
        topic="T", subString=sql, expressionType=expression_type))
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, body.encode())


async def test_check_client_config(cluster: tuple[Daemon, Daemon], client: RemotingClient) -> None:
    broker = cluster[1].addr
    r = await client.invoke(broker, check_client_config("a > 5 AND region IN ('eu','us')"), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = await client.invoke(broker, check_client_config("a > 'x'"), 5)
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert r.remark == "Invalid MessageSelector. Value ''x'' cannot be compared."
    r = await client.invoke(broker, check_client_config("whatever ||", "TAG"), 5)
    assert r.code == ResponseCode.SUCCESS, "TAG subscriptions are not checked"
    r = await client.invoke(broker, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, b"{nope"), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "bad check-client body" in (r.remark or "")


async def consumer_online(client: RemotingClient, broker: str, group: str) -> bool:
    r = await client.invoke(broker, RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                            {"consumerGroup": group}), 5)
    return r.code == ResponseCode.SUCCESS


@pytest.mark.parametrize("kind", [PushConsumer, LitePullConsumer], ids=["push", "lite_pull"])
async def test_bad_expression_is_refused_at_start(cluster: tuple[Daemon, Daemon], client: RemotingClient,
                                                  kind: type[LitePullConsumer]) -> None:
    ns, broker = cluster[0].addr, cluster[1].addr
    topic = "SqlBad"
    await produce(ns, topic, [])
    group = f"cg_bad_{kind.__name__}"
    c = kind(group, ns, consume_from_where=FIRST)
    c.subscribe(topic, MessageSelector.by_sql("a > 5 AND region IN ('eu', 'us'"))
    if isinstance(c, PushConsumer):
        c.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)  # type: ignore[arg-type,return-value]
    with pytest.raises(MQBrokerError) as info:
        await c.start()
    assert info.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "Invalid MessageSelector" in (info.value.remark or "") and "')'" in (info.value.remark or "")
    assert not await consumer_online(client, broker, group), "a refused consumer never registered"
    await c.shutdown()  # harmless after a failed start


def test_empty_sql_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="Expression can't be null"):
        MessageSelector.by_sql("")


async def test_broker_without_property_filter_refuses_sql(daemons: DaemonSet, client: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)  # enablePropertyFilter defaults to false, as in RocketMQ 4.x
    topic = "SqlOff"
    await produce(ns.addr, topic, [Message(topic, b"x", properties={"a": "1"})])
    r = await client.invoke(broker.addr, check_client_config("a = 1"), 5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The broker does not support consumer to filter message by SQL92")
    r = await client.invoke(broker.addr, sql_pull("cg_off", topic, 0, 0, "a = 1"), 5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The broker does not support consumer to filter message by SQL92")
    c = LitePullConsumer("cg_off", ns.addr, consume_from_where=FIRST)
    c.subscribe(topic, MessageSelector.by_sql("a = 1"))
    with pytest.raises(MQBrokerError) as info:
        await c.start()
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert "does not support consumer to filter message by SQL92" in str(info.value)
    # TAG consumers are unaffected
    seen = await consume_lite(ns.addr, "cg_off_tag", topic, MessageSelector.by_tag("*"))
    assert b"x" in seen


async def test_pull_without_subscription_flag_uses_the_heartbeat_selector(cluster: tuple[Daemon, Daemon],
                                                                          client: RemotingClient) -> None:
    """Java push consumers (postSubscriptionWhenPull=false) send their selector only by heartbeat."""
    ns, broker = cluster[0].addr, cluster[1].addr
    topic = "SqlHeartbeat"
    await produce(ns, topic, [Message(topic, f"h{i}".encode(), properties={"a": str(i)}) for i in range(8)])

    async def heartbeat(group: str, sql: str) -> None:
        sub = SubscriptionData(topic=topic, subString=sql, expressionType="SQL92", subVersion=1)
        data = HeartbeatData(clientID="127.0.0.1@hb", consumerDataSet=[ConsumerData(
            groupName=group, subscriptionDataSet=[sub])])
        r = await client.invoke(broker, RemotingCommand.request(RequestCode.HEART_BEAT, None, data.encode()), 5)
        assert r.code == ResponseCode.SUCCESS, "Java accepts the heartbeat whatever the selector"

    def pull(group: str) -> RemotingCommand:
        request = sql_pull(group, topic, 0, 0, "ignored")
        assert request.ext_fields is not None
        request.ext_fields["sysFlag"] = "0"  # no FLAG_SUBSCRIPTION: the registered selector rules
        return request

    await heartbeat("cg_hb", "a = 4 OR sentinel IS NOT NULL")
    r = await client.invoke(broker, pull("cg_hb"), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert [m.body for m in decode_records(r.body or b"")] == [b"h4", b"sentinel-0"]
    await heartbeat("cg_hb_bad", "a = = 4")
    r = await client.invoke(broker, pull("cg_hb_bad"), 5)
    assert r.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert "Your expression may be wrong" in (r.remark or "") and "Invalid MessageSelector" in (r.remark or "")
