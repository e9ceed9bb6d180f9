"""Client pieces with no I/O: unique ids, latency fault tolerance, send headers."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import NoRouteError
from rocketmq_py.client.instance import ClientConfig, MQClientInstance
from rocketmq_py.client.latency import LatencyFaultTolerance
from rocketmq_py.client.message import Message
from rocketmq_py.client.message_id import MessageClientIDSetter
from rocketmq_py.client.producer import Producer
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeader, SendMessageRequestHeaderV2
from rocketmq_py.remoting.protocol.message import properties_to_string
from rocketmq_py.remoting.protocol.route import TopicRouteData
from tests.waiting import wait_until


def test_uniq_id_layout_and_order() -> None:
    setter = MessageClientIDSetter(ip=bytes([192, 168, 0, 1]))
    now = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC).astimezone()
    now_ms = int(now.timestamp() * 1000)
    a = setter.create_uniq_id(now_ms)
    b = setter.create_uniq_id(now_ms + 5)
    assert len(a) == 32 and a == a.upper() and a.startswith("C0A80001")
    assert a[:20] == b[:20], "ip, pid and the per-process part are fixed"
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert int(a[20:28], 16) == now_ms - int(month_start.timestamp() * 1000)
    assert int(b[20:28], 16) == int(a[20:28], 16) + 5
    assert (int(b[28:], 16) - int(a[28:], 16)) % 65536 == 1
    assert len({setter.create_uniq_id(now_ms) for _ in range(1000)}) == 1000
    assert setter.create_uniq_id(now_ms + 5)[20:28] == b[20:28], "a millisecond seen again is stamped alike"
    assert setter.create_uniq_id(now_ms + 6)[20:28] != b[20:28]


def test_latency_marks_slow_and_failed_brokers() -> None:
    lft = LatencyFaultTolerance()
    assert lft.compute_not_available_duration(40) == 0
    assert lft.compute_not_available_duration(600) == 30000
    assert lft.compute_not_available_duration(20000) == 600000
    lft.update_fault_item("broker-a", 40, now=0)
    assert lft.is_available("broker-a", now=0)
    lft.update_fault_item("broker-b", 0, isolation=True, now=0)  # a failed send counts as 30 s
    assert not lft.is_available("broker-b", now=599)
    assert lft.is_available("broker-b", now=600)
    assert lft.pick_one_at_least(["broker-a", "broker-b"]) == "broker-a"


@pytest.mark.parametrize(("topic", "code", "props"), [
    ("Orders", RequestCode.SEND_MESSAGE_V2, {"UNIQ_KEY": "U1", "WAIT": "true", "TAGS": "a"}),
    ("Orders", RequestCode.SEND_BATCH_MESSAGE, {"WAIT": "true"}),
    ("%RETRY%cg", RequestCode.SEND_MESSAGE_V2, {"UNIQ_KEY": "U2", "RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "5"}),
])
def test_send_header_matches_the_typed_header(topic: str, code: int, props: dict[str, str]) -> None:
    """The producer builds a send's extFields from a per-topic template; it must say exactly
    what the typed V2 header would."""
    producer = Producer("pg", "127.0.0.1:1", create_topic_key="TBW102", default_topic_queue_nums=4)
    mq = MessageQueue(topic, "broker-a", 2)
    msg = Message(topic, b"body", flag=7)
    for _ in range(2):  # the template is made by the first call and reused by the second
        got = producer._request(mq, msg, msg.body, 1, props, code).ext_fields or {}
        retry = topic.startswith("%RETRY%")
        typed = SendMessageRequestHeaderV2.from_v1(SendMessageRequestHeader(
            producerGroup="pg", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=2, sysFlag=1,
            bornTimestamp=int(got["g"]), flag=7, properties=properties_to_string(props),
            reconsumeTimes=3 if retry else 0, unitMode=False,
            batch=True if code == RequestCode.SEND_BATCH_MESSAGE else None,
            maxReconsumeTimes=5 if retry else None, bname="broker-a")).to_ext_fields()
        assert got == typed


async def test_concurrent_route_lookups_of_a_topic_share_one_name_server_request() -> None:
    instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1"), "test@1")
    asked: list[str] = []
    answer: asyncio.Future[TopicRouteData] = asyncio.get_running_loop().create_future()

    async def ask(topic: str, timeout: float | None = None) -> TopicRouteData:
        asked.append(topic)
        return await answer

    instance.get_topic_route_from_namesrv = ask  # type: ignore[method-assign]
    waiting = [asyncio.ensure_future(instance.update_topic_route("T")) for _ in range(5)]
    other = asyncio.ensure_future(instance.update_topic_route("U"))
    assert await wait_until(lambda: len(asked) >= 2, 2, 0.001)
    assert asked == ["T", "U"], "one request per topic, however many ask at once"
    route = TopicRouteData()
    answer.set_result(route)
    assert all(r is route for r in await asyncio.gather(*waiting, other))
    assert instance.topic_route_table["T"] is route
    answer2: asyncio.Future[TopicRouteData] = asyncio.get_running_loop().create_future()
    answer = answer2
    answer2.set_exception(NoRouteError("no route"))
    results = await asyncio.gather(instance.update_topic_route("T"), instance.update_topic_route("T"),
                                   return_exceptions=True)
    assert asked == ["T", "U", "T"], "a finished look-up is not reused: the next one asks again"
    assert all(isinstance(r, NoRouteError) for r in results), "a failure reaches every caller"
