"""ali-ons 3.12.0 (npm, pure JavaScript), unchanged, against real daemons (issue 21).

What ali-ons offers, read from its source (lib/producer, lib/consumer, lib/mq_client_api.js), and
how each is covered here:

- Sends: one method, ``Producer#send``, a request answered by the broker (sync on the wire); a
  JavaScript caller may keep several in flight, which is covered. It has **no** async-callback,
  oneway or batch send and no transactional producer.
- Orderly sends: ``Message#shardingKey`` picks the queue by an MD5 of the key, so one key's
  messages go to one queue in send order (except keys that hash to queue 0, which its own bug
  sends round-robin; the test avoids them). Its consumer has **no** orderly mode (it never locks
  queues on the broker with LOCK_BATCH_MQ); it consumes each queue's messages one after another,
  which is what the order test checks.
- Delay: ``Message#delayTimeLevel`` (the DELAY property). ``setStartDeliverTime`` writes Aliyun's
  ``__STARTDELIVERTIME``, which Apache RocketMQ's broker ignores, as ours does; not covered.
- Push consumer: clustering and broadcasting, tag expressions (``a || b``; sent as subscription
  data with Java's String hash codes), SQL92 expressions; a handler returning ``ACTION_RETRY``
  sends the message back (CONSUMER_SEND_MSG_BACK, delay level 0: the broker's ``3 +
  reconsumeTimes``) and ali-ons consumes it again from ``%RETRY%<group>``; offsets committed to the
  broker in clustering mode, kept in memory in broadcasting mode.
- Where a new group starts (consumeFromWhere: LAST_OFFSET, FIRST_OFFSET, TIMESTAMP); on a young
  queue the broker's answer of offset 0 decides, as with Java's client.
- Pull: **no** pull consumer; the push consumer pulls through ``MQClientAPI#pullMessage``, which
  the pull test calls directly from offset 0 to NO_NEW_MSG.
- Bodies of 4 KiB or more are deflated by the producer (sysFlag bit 0) and inflated by the consumer.

Every script is pointed at the test's NameServer on 127.0.0.1 with ``nameSrv`` (never the HTTP
address service of ``onsAddr``), and refuses any connection beyond the loopback (common.js).
"""

from __future__ import annotations

import functools
import hashlib
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocketmq_py.client import Admin
from tests.conftest import Cluster
from tests.integration.daemons import Daemon
from tests.interop.ali_ons import Event, NodeScript, Scripts, body, fresh
from tests.waiting import wait_for_async


@pytest.fixture
async def scripts(cluster: Cluster, tmp_path: str) -> AsyncIterator[Scripts]:
    s = Scripts(str(tmp_path), cluster.namesrv_addr)
    try:
        yield s
    finally:
        await s.kill_all()


async def create_topic(ns: Daemon, topic: str, queues: int = 4) -> None:
    async with Admin(ns.addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


async def committed(ns: Daemon, group: str, topic: str, total: int) -> bool:
    """Whether ``group``'s committed offsets on ``topic`` add up to ``total``."""
    async with Admin(ns.addr) as admin:
        offsets = await admin.examine_consume_stats(group, topic)
    return sum(o.consumer_offset for o in offsets.values()) == total


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def message(topic: str, key: str, tags: str | None = "TagA", size: int = 64, **fields: Any) -> dict[str, Any]:
    return {"topic": topic, "tags": tags, "keys": [key], "body": body(size, zlib.crc32(key.encode())), **fields}


def shard_index(key: str, queues: int) -> int:
    """The queue index ali-ons' producer derives from a sharding key."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big") % queues


def by_key(events: list[Event]) -> dict[str, Event]:
    table = {e["keys"]: e for e in events}
    assert len(table) == len(events), f"duplicate deliveries: {Counter(e['keys'] for e in events).most_common(3)}"
    return table


async def test_sync_sends_and_pull_to_no_new_msg(cluster: Cluster, scripts: Scripts) -> None:
    ns = cluster.namesrv
    topic, group = fresh("ons_send"), fresh("ons_pg")
    await create_topic(ns, topic)
    sequential = [message(topic, f"s{i}", "TagA" if i % 2 else "TagB", size=100 + i) for i in range(12)]
    in_flight = [message(topic, f"f{i}", "TagA" if i % 2 else "TagB", size=200 + i) for i in range(12)]
    sent = await scripts.produce(group, sequential) + await scripts.produce(group, in_flight, in_flight=6)

    positions = {(e["queueId"], e["queueOffset"]) for e in sent}
    assert len(positions) == 24, "two sends were answered with one queue position"
    assert {q for q, _ in positions} == {0, 1, 2, 3}

    pulled = await scripts.pull(fresh("ons_cg"), topic)
    got = by_key(pulled.of("pulled"))
    sent_messages = sequential + in_flight
    assert sorted(got) == sorted(m["keys"][0] for m in sent_messages)
    for m, answer in zip(sent_messages, sent, strict=True):
        e = got[m["keys"][0]]
        assert (e["queueId"], e["queueOffset"]) == (answer["queueId"], answer["queueOffset"])
        assert (e["tags"], e["bodyLength"], e["bodySha256"]) == (m["tags"], len(m["body"]), digest(m["body"]))
        assert e["msgId"] == answer["msgId"]
    # Every queue was read to its end: the last request of each answered NO_NEW_MSG at its max offset.
    last = {p["queueId"]: p for p in pulled.of("pull")}
    assert {q: (p["pullStatus"], p["offset"]) for q, p in last.items()} == {
        q: ("NO_NEW_MSG", sum(1 for qq, _ in positions if qq == q)) for q in range(4)}

    # The broker filters by the pull's subscription: only TagA comes back.
    tag_a = await scripts.pull(fresh("ons_cg"), topic, "TagA")
    assert sorted(e["keys"] for e in tag_a.of("pulled")) == sorted(m["keys"][0] for m in sent_messages
                                                                     if m["tags"] == "TagA")


def _received_at_least(consumer: NodeScript, n: int) -> bool:
    return len(received(consumer)) >= n


def received(consumer: NodeScript, action: str | None = None) -> list[Event]:
    return [e for e in consumer.of("received") if action is None or e["action"] == action]


def no_client_errors(*consumers: NodeScript) -> None:
    """No error ali-ons reported (a refused heartbeat, a failed pull or offset commit) while each
    consumer ran; those its own close causes (a request cut short by it) do not count."""
    for c in consumers:
        kinds = [e["event"] for e in c.events]
        running = kinds[: kinds.index("stopping")] if "stopping" in kinds else kinds
        assert "client_error" not in running, c.report()


async def test_push_clustering_with_tag_filter(cluster: Cluster, scripts: Scripts) -> None:
    ns = cluster.namesrv
    topic, group = fresh("ons_tag"), fresh("ons_cg")
    await create_topic(ns, topic)
    messages = [message(topic, f"{tag}{i}", tag) for i in range(8) for tag in ("TagA", "TagB", "TagC")]
    await scripts.produce(fresh("ons_pg"), messages)

    consumer = await scripts.consumer(group, topic, subExpression="TagA || TagB")
    wanted = sorted(m["keys"][0] for m in messages if m["tags"] != "TagC")
    await consumer.wait_for(lambda: len(received(consumer)) >= len(wanted), 20)
    assert await consumer.stop() == 0, consumer.report()
    assert sorted(by_key(received(consumer))) == wanted
    no_client_errors(consumer)


async def test_push_broadcasting_with_tag_filter(cluster: Cluster, scripts: Scripts) -> None:
    """Both members of a broadcasting group receive every TagA message."""
    ns = cluster.namesrv
    topic, group = fresh("ons_bc"), fresh("ons_cg")
    await create_topic(ns, topic)
    messages = [message(topic, f"{tag}{i}", tag) for i in range(8) for tag in ("TagA", "TagB")]
    await scripts.produce(fresh("ons_pg"), messages)

    members = [await scripts.consumer(group, topic, subExpression="TagA", broadcast=True) for _ in range(2)]
    wanted = sorted(m["keys"][0] for m in messages if m["tags"] == "TagA")
    for c in members:
        await c.wait_for(functools.partial(_received_at_least, c, len(wanted)), 20)
    for c in members:
        assert await c.stop() == 0, c.report()
        assert sorted(by_key(received(c))) == wanted
        assert c.of("assigned")[-1]["queueIds"] == [0, 1, 2, 3]
    no_client_errors(*members)


async def test_two_consumers_of_one_group_split_the_queues(cluster: Cluster, scripts: Scripts) -> None:
    ns = cluster.namesrv
    topic, group = fresh("ons_split"), fresh("ons_cg")
    await create_topic(ns, topic)
    a = await scripts.consumer(group, topic)
    b = await scripts.consumer(group, topic)

    def split() -> bool:
        qa = a.of("assigned")[-1]["queueIds"] if a.of("assigned") else []
        qb = b.of("assigned")[-1]["queueIds"] if b.of("assigned") else []
        return len(qa) == 2 and len(qb) == 2 and sorted(qa + qb) == [0, 1, 2, 3]

    # Each sees the other through GET_CONSUMER_LIST_BY_GROUP at its next rebalance (every second).
    await a.wait_for(split, 20)
    messages = [message(topic, f"m{i}") for i in range(40)]
    sent = await scripts.produce(fresh("ons_pg"), messages)
    await a.wait_for(lambda: len(received(a)) + len(received(b)) >= len(messages), 20)
    assert await a.stop() == 0, a.report()
    assert await b.stop() == 0, b.report()

    got_a, got_b = by_key(received(a)), by_key(received(b))
    assert not set(got_a) & set(got_b), "a message went to both members"
    assert sorted([*got_a, *got_b]) == sorted(m["keys"][0] for m in messages)
    queue_of = {m["keys"][0]: s["queueId"] for m, s in zip(messages, sent, strict=True)}
    assert {queue_of[k] for k in got_a} == set(a.of("assigned")[-1]["queueIds"])
    assert {queue_of[k] for k in got_b} == set(b.of("assigned")[-1]["queueIds"])
    no_client_errors(a, b)


async def test_push_sql92_filter(cluster: Cluster, scripts: Scripts) -> None:
    """ali-ons does not filter SQL92 subscriptions itself: what arrives is what the broker chose."""
    ns = cluster.namesrv
    topic, group = fresh("ons_sql"), fresh("ons_cg")
    await create_topic(ns, topic)
    messages = [message(topic, f"m{i}", properties={"a": str(i)}) for i in range(12)]
    await scripts.produce(fresh("ons_pg"), messages)

    consumer = await scripts.consumer(group, topic, subExpression={"expressionType": "SQL92", "subString": "a >= 8"})
    await consumer.wait_for(lambda: len(received(consumer)) >= 4, 20)
    # The group's committed offsets reach the end of every queue: all 12 were read, 4 delivered.
    assert await wait_for_async(lambda: committed(ns, group, topic, len(messages)), 20)
    assert await consumer.stop() == 0, consumer.report()
    assert sorted(by_key(received(consumer))) == ["m10", "m11", "m8", "m9"]
    no_client_errors(consumer)


async def test_sharding_key_sends_are_consumed_in_order(cluster: Cluster, scripts: Scripts) -> None:
    ns = cluster.namesrv
    topic, group = fresh("ons_order"), fresh("ons_cg")
    await create_topic(ns, topic)
    # ali-ons picks queue ids[md5(key)[0:4] % n] but drops the choice when that id is 0 (`queueId ||
    # ''` in TopicPublishInfo#selectOneMessageQueue), spreading such a key round-robin: a client
    # bug, so the keys here are ones that hash to another queue.
    shards = [k for k in (f"order-{n}" for n in range(1000, 1100)) if shard_index(k, 4) != 0][:3]
    messages = [message(topic, f"{s}-{i}", shardingKey=s) for i in range(10) for s in shards]
    sent = await scripts.produce(fresh("ons_pg"), messages)
    for s in shards:
        answers = [a for m, a in zip(messages, sent, strict=True) if m["shardingKey"] == s]
        assert len({a["queueId"] for a in answers}) == 1, f"{s} was spread over queues"
        offsets = [a["queueOffset"] for a in answers]
        assert offsets == sorted(offsets)

    consumer = await scripts.consumer(group, topic)
    await consumer.wait_for(lambda: len(received(consumer)) >= len(messages), 20)
    assert await consumer.stop() == 0, consumer.report()
    got = received(consumer)
    by_key(got)
    for s in shards:
        seen = [e["keys"] for e in got if e["properties"].get("__SHARDING_KEY") == s]
        assert seen == [f"{s}-{i}" for i in range(10)]
    no_client_errors(consumer)


async def test_action_retry_redelivers_through_the_retry_topic(cluster: Cluster,
                                                                scripts: Scripts) -> None:
    ns = cluster.namesrv
    topic, group = fresh("ons_retry"), fresh("ons_cg")
    await create_topic(ns, topic)
    messages = [message(topic, f"m{i}") for i in range(6)]
    failing = ["m1", "m4"]
    await scripts.produce(fresh("ons_pg"), messages)

    consumer = await scripts.consumer(group, topic, retryKeys=failing)
    await consumer.wait_for(lambda: len(received(consumer, "ok")) >= len(messages), 30)
    assert await consumer.stop() == 0, consumer.report()

    assert sorted(e["keys"] for e in received(consumer, "retry")) == failing
    ok = by_key(received(consumer, "ok"))
    assert sorted(ok) == sorted(m["keys"][0] for m in messages)
    firsts = {e["keys"]: e for e in received(consumer, "retry")}
    for key in failing:
        again = ok[key]
        # The redelivery came from %RETRY%<group>: ali-ons restores the topic from RETRY_TOPIC.
        assert again["reconsumeTimes"] == 1
        assert again["properties"]["RETRY_TOPIC"] == topic and again["topic"] == topic
        assert again["properties"]["ORIGIN_MESSAGE_ID"] == firsts[key]["msgId"]
        assert again["bodySha256"] == firsts[key]["bodySha256"]
    for m in messages:
        if m["keys"][0] not in failing:
            assert ok[m["keys"][0]]["reconsumeTimes"] == 0
    async with Admin(ns.addr) as admin:
        stats = await admin.examine_topic_stats(f"%RETRY%{group}")
    assert sum(o.max_offset for o in stats.values()) == len(failing)
    no_client_errors(consumer)


async def test_delay_level(cluster: Cluster, scripts: Scripts) -> None:
    """Level 2 is 2 s on the test broker: the delayed message arrives no sooner, the plain one at once."""
    ns = cluster.namesrv
    topic, group = fresh("ons_delay"), fresh("ons_cg")
    await create_topic(ns, topic)
    consumer = await scripts.consumer(group, topic)
    await consumer.wait_for(lambda: len(consumer.of("assigned")) > 0, 20)
    await scripts.produce(fresh("ons_pg"), [message(topic, "delayed", delayTimeLevel=2), message(topic, "plain")])
    await consumer.wait_for(lambda: len(received(consumer)) >= 2, 20)
    assert await consumer.stop() == 0, consumer.report()

    got = by_key(received(consumer))
    delayed, plain = got["delayed"], got["plain"]
    assert delayed["properties"]["DELAY"] == "2"
    assert delayed["receivedAt"] - delayed["bornTimestamp"] >= 2000 - 50  # clock granularity
    assert plain["receivedAt"] < delayed["receivedAt"]
    no_client_errors(consumer)


@pytest.mark.parametrize("size", [8 * 1024, 100 * 1024])
async def test_compressed_body(cluster: Cluster, scripts: Scripts, size: int) -> None:
    """ali-ons deflates bodies of 4 KiB or more: the broker stores the deflated bytes with the
    compressed flag and serves them so the consumer inflates the original."""
    ns = cluster.namesrv
    topic, group = fresh("ons_big"), fresh("ons_cg")
    await create_topic(ns, topic)
    messages = [message(topic, f"big{i}", size=size) for i in range(3)] + [message(topic, "small", size=1000)]
    await scripts.produce(fresh("ons_pg"), messages)

    consumer = await scripts.consumer(group, topic)
    await consumer.wait_for(lambda: len(received(consumer)) >= len(messages), 20)
    assert await consumer.stop() == 0, consumer.report()
    got = by_key(received(consumer))
    for m in messages:
        e = got[m["keys"][0]]
        assert (e["bodyLength"], e["bodySha256"]) == (len(m["body"]), digest(m["body"]))
        assert e["sysFlag"] & 1 == (1 if len(m["body"]) >= 4096 else 0)
    no_client_errors(consumer)


async def test_restarted_consumer_resumes_at_its_committed_offset(cluster: Cluster,
                                                                  scripts: Scripts) -> None:
    ns = cluster.namesrv
    topic, group = fresh("ons_resume"), fresh("ons_cg")
    await create_topic(ns, topic)
    first = [message(topic, f"a{i}") for i in range(12)]
    await scripts.produce(fresh("ons_pg"), first)
    consumer = await scripts.consumer(group, topic)
    await consumer.wait_for(lambda: len(received(consumer)) >= len(first), 20)
    assert await consumer.stop() == 0, consumer.report()
    assert sorted(by_key(received(consumer))) == sorted(m["keys"][0] for m in first)

    # close() committed them with a oneway UPDATE_CONSUMER_OFFSET: the broker may still be reading it.
    assert await wait_for_async(lambda: committed(ns, group, topic, len(first)), 10)

    second = [message(topic, f"b{i}") for i in range(12)]
    await scripts.produce(fresh("ons_pg"), second)
    again = await scripts.consumer(group, topic)
    await again.wait_for(lambda: len(received(again)) >= len(second), 20)
    assert await again.stop() == 0, again.report()
    assert sorted(by_key(received(again))) == sorted(m["keys"][0] for m in second)
    no_client_errors(consumer, again)


@pytest.mark.parametrize("where", ["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_TIMESTAMP"])
async def test_new_group_reads_a_young_queue_from_zero(cluster: Cluster, scripts: Scripts,
                                                       where: str) -> None:
    """Java's broker answers QUERY_CONSUMER_OFFSET for a group with no offset on a queue whose first
    message is still stored with 0, not QUERY_NOT_FOUND: ali-ons then starts there, as Java's
    client does, whatever its consumeFromWhere (ConsumerManageProcessor#queryConsumerOffset)."""
    ns = cluster.namesrv
    topic, group = fresh("ons_young"), fresh("ons_cg")
    await create_topic(ns, topic)
    before = [message(topic, f"old{i}") for i in range(8)]
    await scripts.produce(fresh("ons_pg"), before)
    consumer = await scripts.consumer(group, topic, consumeFromWhere=where,
                                      consumeTimestamp=time.strftime("%Y%m%d%H%M%S", time.localtime()))
    await consumer.wait_for(lambda: len(received(consumer)) >= len(before), 20)
    after = [message(topic, f"new{i}") for i in range(8)]
    await scripts.produce(fresh("ons_pg"), after)
    await consumer.wait_for(lambda: len(received(consumer)) >= len(before) + len(after), 20)
    assert await wait_for_async(lambda: committed(ns, group, topic, len(before) + len(after)), 20)
    assert await consumer.stop() == 0, consumer.report()
    assert sorted(by_key(received(consumer))) == sorted(m["keys"][0] for m in before + after)
    no_client_errors(consumer)


async def test_scripts_connect_to_the_loopback_only(scripts: Scripts) -> None:
    """The guard of common.js is live: a NameServer address beyond 127.0.0.1 ends the script before
    any connection is made."""
    s = await scripts.start("pull", 20, nameSrv="192.0.2.1:9876", group=fresh("ons_cg"), topic=fresh("ons_t"))
    assert await s.finish() == 4, s.report()
    assert s.of("violation") == [{"event": "violation", "host": "192.0.2.1"}]
