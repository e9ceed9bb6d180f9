"""The SDK's Producer against real daemons: every send mode, routes, compression, bad input."""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import AsyncIterator

import pytest

from rocketmq_py.client import (
    Admin,
    ClientStateError,
    LitePullConsumer,
    Message,
    MessageValidationError,
    NoRouteError,
    Producer,
    SendResult,
    SendStatus,
    select_by_hash,
)
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode
from rocketmq_py.remoting.codes import SerializeType
from rocketmq_py.remoting.protocol.message import COMPRESSED_FLAG, decode_records
from tests.integration.broker_client import call, pull_request
from tests.integration.daemons import Daemon, DaemonSet
from tests.waiting import wait_until


@pytest.fixture
async def producer(cluster: tuple[Daemon, Daemon]) -> AsyncIterator[Producer]:
    async with Producer("pg_test", cluster[0].addr) as p:
        yield p


async def pull_all(broker: Daemon, topic: str, queue_id: int) -> list:  # type: ignore[type-arg]
    c = RemotingClient()
    try:
        r = await c.invoke(broker.addr, pull_request("verify", topic, queue_id, 0, max_nums=32), 5)
        return list(decode_records(r.body or b""))
    finally:
        await c.close()


async def test_sync_send_auto_creates_and_reports(producer: Producer, cluster: tuple[Daemon, Daemon]) -> None:
    result = await producer.send(Message("ProdSync", b"hello", tags="TagA", keys=["k1", "k2"]))
    assert result.send_status == SendStatus.SEND_OK
    assert len(result.msg_id) == 32 and result.offset_msg_id and result.queue_offset == 0
    assert result.message_queue.broker_name == "broker-a"
    msgs = await pull_all(cluster[1], "ProdSync", result.message_queue.queue_id)
    assert msgs[0].body == b"hello" and msgs[0].tags == "TagA" and msgs[0].keys == "k1 k2"
    assert msgs[0].properties["UNIQ_KEY"] == result.msg_id
    queues = await producer.fetch_publish_message_queues("ProdSync")
    assert len(queues) == 4


async def test_async_oneway_and_queue_choice(producer: Producer, cluster: tuple[Daemon, Daemon]) -> None:
    done: asyncio.Queue[SendResult | BaseException] = asyncio.Queue()
    queues = await producer.fetch_publish_message_queues("ProdModes")
    for i in range(5):
        producer.send_async(Message("ProdModes", f"a{i}".encode()),
                            lambda r, e: done.put_nowait(e if e else r), queue=queues[2])
    results = [await asyncio.wait_for(done.get(), 5) for _ in range(5)]
    assert all(isinstance(r, SendResult) and r.message_queue.queue_id == 2 for r in results)
    await producer.send_oneway(Message("ProdModes", b"one-way"), queue=queues[3])
    deadline = asyncio.get_running_loop().time() + 5
    msgs: list = []  # type: ignore[type-arg]
    while asyncio.get_running_loop().time() < deadline and not msgs:
        msgs = await pull_all(cluster[1], "ProdModes", 3)
    assert [m.body for m in msgs] == [b"one-way"]


async def test_selector_keeps_one_key_on_one_queue(producer: Producer) -> None:
    results = [await producer.send(Message("ProdOrder", f"{k}-{i}".encode()), selector=select_by_hash, arg=k)
               for i in range(6) for k in ("order-1", "order-2")]
    by_key: dict[str, set[int]] = {}
    for r, k in zip(results, ["order-1", "order-2"] * 6, strict=True):
        by_key.setdefault(k, set()).add(r.message_queue.queue_id)
    assert all(len(qs) == 1 for qs in by_key.values())


async def test_batch_and_compression(producer: Producer, cluster: tuple[Daemon, Daemon]) -> None:
    queues = await producer.fetch_publish_message_queues("ProdBatch")
    result = await producer.send_batch([Message("ProdBatch", f"b{i}".encode(), keys=f"bk{i}") for i in range(4)],
                                       queue=queues[0])
    assert len(result.msg_id.split(",")) == 4 and len(result.offset_msg_id.split(",")) == 4
    big = os.urandom(2000) * 5  # 10 KB: over the 4 KiB compression threshold
    await producer.send(Message("ProdBatch", big), queue=queues[0])
    msgs = await pull_all(cluster[1], "ProdBatch", 0)
    assert [m.body for m in msgs[:4]] == [b"b0", b"b1", b"b2", b"b3"]
    assert msgs[4].sys_flag & COMPRESSED_FLAG and zlib.decompress(msgs[4].body) == big


async def test_consumers_and_admin_hand_back_inflated_bodies(producer: Producer,
                                                             cluster: tuple[Daemon, Daemon]) -> None:
    """A body the producer compressed is stored compressed but reaches users as it was sent."""
    big = os.urandom(3000) * 4
    queue = (await producer.fetch_publish_message_queues("ProdInflate"))[0]
    sent = await producer.send(Message("ProdInflate", big, keys="inflate-1"), queue=queue)
    stored = await pull_all(cluster[1], "ProdInflate", queue.queue_id)
    assert stored[0].sys_flag & COMPRESSED_FLAG and stored[0].body != big
    async with LitePullConsumer("cg_inflate", cluster[0].addr, instance_name="inflate") as consumer:
        consumer.assign([queue])
        got = await consumer.poll(timeout=5.0)
    assert [m.body for m in got] == [big]
    async with Admin(cluster[0].addr) as admin:
        viewed = await admin.view_message(sent.offset_msg_id)
    assert viewed.body == big and viewed.sys_flag & COMPRESSED_FLAG


async def test_no_route_and_bad_input(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "autoCreateTopicEnable=false")
    p = Producer("pg_bad", ns.addr, send_msg_timeout=2)
    with pytest.raises(ClientStateError, match="start"):
        await p.send(Message("T", b"x"))
    async with p:
        with pytest.raises(NoRouteError) as info:
            await p.send(Message("NoSuchTopic", b"x"))
        text = str(info.value)
        assert "NoSuchTopic" in text and ns.addr in text and "autoCreateTopicEnable" in text
        with pytest.raises(MessageValidationError, match="blank"):
            await p.send(Message("", b"x"))
        with pytest.raises(MessageValidationError, match="over max"):
            await p.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
        with pytest.raises(MessageValidationError, match="zero"):
            await p.send(Message("T", b""))
    c = RemotingClient()
    try:
        info_body = await call(c, broker.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert b"NoSuchTopic" not in (info_body.body or b"")
    finally:
        await c.close()


async def test_one_namesrv_down_the_other_answers(cluster: tuple[Daemon, Daemon], daemons: DaemonSet) -> None:
    dead = daemons.namesrv(name="dead")
    dead_addr = dead.addr
    dead.stop()
    async with Producer("pg_failover", f"{dead_addr};{cluster[0].addr}") as p:
        for i in range(3):
            r = await p.send(Message("ProdFailover", f"f{i}".encode()))
            assert r.send_status == SendStatus.SEND_OK


class _AnswerSerialization:
    """An RPC hook noting, per request code, the serialization each answer came back in: the
    broker answers in the request's, so this is what went over the wire."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        assert response is not None  # a client's hooks see answers only
        self.seen.append((request.code, response.serialize_type))


@pytest.mark.parametrize("offered_taken", [True, False])
async def test_sends_switch_to_msgpack_headers_when_the_broker_offers_them(
        cluster: tuple[Daemon, Daemon], offered_taken: bool) -> None:
    topic = f"ProdHeaders{offered_taken}"
    producer = Producer(f"pg_headers_{offered_taken}", cluster[0].addr)
    producer.config.msgpack_headers = offered_taken
    async with producer:
        instance = producer._instance
        assert instance is not None
        hook = _AnswerSerialization()
        instance.remoting.rpc_hooks.append(hook)
        await producer.send(Message(topic, b"first"))
        # The route's new broker is greeted with a heartbeat at once, not at the 30 s tick.
        assert await wait_until(lambda: any(code == RequestCode.HEART_BEAT for code, _ in hook.seen), 5)
        await producer.send(Message(topic, b"second", tags="TagA", keys=["k2"], properties={"a": "1"}))
        sends = [st for code, st in hook.seen if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)]
        assert sends[-1] == (SerializeType.MSGPACK if offered_taken else SerializeType.JSON)
    received = [m for q in range(8) for m in await pull_all(cluster[1], topic, q)]
    by_body = {m.body: m for m in received}
    assert set(by_body) == {b"first", b"second"}
    second = by_body[b"second"]
    assert second.properties["TAGS"] == "TagA" and second.properties["KEYS"] == "k2" and second.properties["a"] == "1"
