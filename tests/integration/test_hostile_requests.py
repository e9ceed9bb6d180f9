"""Requests with any field of any type and range, interleaved with good sends, against real
daemons: the daemons stay up, a value Java's parsers refuse is refused with a remark naming the
field, and every acknowledged message is read back at its acknowledged queue offset, before and
after a restart of the broker (issue 20: nothing acknowledged is ever hidden or lost).

Hypothesis draws the requests; the daemons live for the whole run (one NameServer, one broker),
and the acknowledged messages accumulate across examples, so a defect that only shows several
requests later (a queue offset taken by a refused send) is seen by the next check.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchEntry,
    decode_offset_msg_id,
    decode_records,
    encode_batch,
    properties_to_string,
    string_to_properties,
)
from rocketmq_py.remoting.protocol.route import TopicRouteData
from rocketmq_py.remoting.protocol.topic import MAX_QUEUE_NUMS
from tests.integration.broker_client import pull_request, send_request
from tests.integration.daemons import Daemon, DaemonSet

pytestmark = pytest.mark.slow

GOOD_TOPIC = "Good"
BROKER_OPTIONS = ("mappedFileSizeCommitLog=65536",)  # files roll within the run
GOOD_QUEUES = 4
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # Character.digit(c, 10) takes any Unicode decimal digit


def java_parses(raw: str, bounds: tuple[int, int]) -> bool:
    """Whether Java's Integer.parseInt / Long.parseLong (by ``bounds``) take ``raw``."""
    return bool(_JAVA_INTEGER.fullmatch(raw)) and bounds[0] <= int(raw) <= bounds[1]


# -- field values ---------------------------------------------------------------------------

_ODD_NUMBERS = [" 1", "1 ", "+1", "-0", "1_0", "0x10", "1e3", "1.5", "", "\u0663", "\uff11", "\u00b2", "NaN", "true",
                str(2**31), str(2**31 - 1), str(-(2**31)), str(-(2**31) - 1), str(2**63), str(2**63 - 1),
                str(-(2**63)), str(-(2**63) - 1), "99999999999999999999", "999999999999"]


_BOUNDS = [0, 2**31, -(2**31), 2**63, -(2**63), 10**12, 10**20, MAX_QUEUE_NUMS]


def number_text() -> st.SearchStrategy[str]:
    """Integers of every size as decimal text, and text Python's int() and Java's parsers disagree on."""
    near_bounds = st.builds(lambda bound, step: str(bound + step), st.sampled_from(_BOUNDS), st.integers(-2, 2))
    return st.one_of(st.integers(-(2**70), 2**70).map(str), near_bounds, st.sampled_from(_ODD_NUMBERS),
                     st.text(max_size=8))


def any_text() -> st.SearchStrategy[str]:
    return st.one_of(st.text(max_size=12), st.text(alphabet="abcXYZ_-%|", min_size=120, max_size=300),
                     number_text(), st.sampled_from(["true", "TRUE", "false", "yes", "SINGLE_TAG", "MULTI_TAG", "1"]))


@dataclass
class Field:
    key: str
    kind: str  # "int", "long", "bool", "str"
    good: Callable[[], st.SearchStrategy[str]]

    def odd(self) -> st.SearchStrategy[str | None]:
        """Absent, or anything."""
        return st.one_of(st.none(), number_text() if self.kind in ("int", "long") else any_text())


def just(value: str) -> Callable[[], st.SearchStrategy[str]]:
    return lambda: st.just(value)


def ints(lo: int, hi: int) -> Callable[[], st.SearchStrategy[str]]:
    return lambda: st.integers(lo, hi).map(str)


def now_ms() -> st.SearchStrategy[str]:
    return st.just(str(int(time.time() * 1000)))


def plain_properties() -> st.SearchStrategy[str]:
    """Properties of a plain send, sometimes with a DELAY, WAIT or transaction flag of any value."""
    extra = st.dictionaries(st.sampled_from(["DELAY", "WAIT", "TRAN_MSG", "TAGS", "KEYS", "CLUSTER", "x"]),
                            st.one_of(number_text(), st.sampled_from(["true", "false", "TagA"])), max_size=2)
    return extra.map(lambda d: properties_to_string({"WAIT": "true", "TAGS": "TagA", **d}))


SEND_FIELDS = [
    Field("producerGroup", "str", just("hostile_producer")),
    Field("topic", "str", lambda: st.sampled_from([GOOD_TOPIC, GOOD_TOPIC, "AutoMade"])),
    Field("defaultTopic", "str", just("TBW102")),
    Field("defaultTopicQueueNums", "int", ints(1, 8)),
    Field("queueId", "int", ints(-1, GOOD_QUEUES - 1)),
    Field("sysFlag", "int", lambda: st.sampled_from(["0", "0", "0", "1", "8", "12", "16", "32", "48"])),
    Field("bornTimestamp", "long", now_ms),
    Field("flag", "int", ints(-5, 5)),
    Field("properties", "str", plain_properties),
    Field("reconsumeTimes", "int", just("0")),
    Field("unitMode", "bool", just("false")),
    Field("batch", "bool", just("false")),
    Field("maxReconsumeTimes", "int", ints(0, 16)),
]
V2_KEYS = dict(zip([f.key for f in SEND_FIELDS], "abcdefghijkml", strict=True))
PULL_FIELDS = [
    Field("consumerGroup", "str", just("hostile_cg")),
    Field("topic", "str", just(GOOD_TOPIC)),
    Field("queueId", "int", ints(0, GOOD_QUEUES - 1)),
    Field("queueOffset", "long", ints(0, 50)),
    Field("maxMsgNums", "int", ints(1, 32)),
    Field("sysFlag", "int", just("4")),
    Field("commitOffset", "long", just("0")),
    Field("suspendTimeoutMillis", "long", just("0")),
    Field("subVersion", "long", just("0")),
    Field("subscription", "str", just("*")),
    Field("expressionType", "str", lambda: st.sampled_from(["TAG", "SQL92", "X"])),
]
TOPIC_FIELDS = [
    # Never the topic the checks read: shrinking its queues or perm hides queues on purpose.
    Field("topic", "str", lambda: st.sampled_from(["Scratch", "Scratch2"])),
    Field("defaultTopic", "str", just("TBW102")),
    Field("readQueueNums", "int", lambda: st.one_of(st.integers(1, 16), st.integers(-2, 2**31 - 1)).map(str)),
    Field("writeQueueNums", "int", lambda: st.one_of(st.integers(1, 16), st.integers(-2, 2**31 - 1)).map(str)),
    Field("perm", "int", just("6")),
    Field("topicFilterType", "str", lambda: st.sampled_from(["SINGLE_TAG", "MULTI_TAG"])),
    Field("topicSysFlag", "int", just("0")),
    Field("order", "bool", just("false")),
]
REGISTER_FIELDS = [
    Field("brokerName", "str", just("hostile-broker")),
    Field("brokerAddr", "str", just("127.0.0.1:1")),
    Field("clusterName", "str", just("HostileCluster")),
    Field("haServerAddr", "str", just("127.0.0.1:2")),
    Field("brokerId", "long", lambda: st.one_of(st.integers(0, 3), st.integers(-(2**63), 2**63 - 1)).map(str)),
    Field("compressed", "bool", just("false")),
]


@st.composite
def headers(draw: st.DrawFn, fields: list[Field]) -> dict[str, str | None]:
    """Good values with up to three fields changed to anything (or dropped): a request wrong in
    one place reaches the code behind the header checks."""
    values: dict[str, str | None] = {f.key: draw(f.good()) for f in fields}
    if fields:
        for f in draw(st.lists(st.sampled_from(fields), max_size=3)):
            values[f.key] = draw(f.odd())
    return values


def json_value() -> st.SearchStrategy[object]:
    return st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=8),
                     st.sampled_from(["CONSUME_PASSIVELY", "CLUSTERING", "BROADCASTING", "TAG", "x"]))


def heartbeat_body() -> st.SearchStrategy[bytes]:
    consumer = st.fixed_dictionaries({
        "groupName": st.one_of(st.just("hostile_cg"), json_value()),
        "consumeType": json_value(), "messageModel": json_value(), "consumeFromWhere": json_value(),
        "unitMode": json_value(),
        "subscriptionDataSet": st.lists(st.fixed_dictionaries({
            "topic": st.one_of(st.just(GOOD_TOPIC), json_value()), "subString": json_value(),
            "subVersion": json_value(), "expressionType": json_value(), "tagsSet": st.just([]),
            "codeSet": st.just([]), "classFilterMode": json_value()}), max_size=2)})
    body = st.fixed_dictionaries({"clientID": st.one_of(st.just("hostile@1"), json_value()),
                                  "consumerDataSet": st.lists(consumer, max_size=2),
                                  "producerDataSet": st.lists(st.fixed_dictionaries({"groupName": json_value()}),
                                                              max_size=2)})
    return st.one_of(body.map(lambda d: json.dumps(d).encode()), st.binary(max_size=40))


def register_body() -> st.SearchStrategy[bytes]:
    config = st.fixed_dictionaries({
        "topicName": st.one_of(st.just("RegTopic"), json_value()), "readQueueNums": json_value(),
        "writeQueueNums": json_value(), "perm": json_value(), "topicFilterType": json_value(),
        "topicSysFlag": json_value(), "order": json_value()})
    wrapper = st.fixed_dictionaries({
        "dataVersion": st.fixed_dictionaries({"counter": json_value(), "timestamp": json_value()}),
        "topicConfigTable": st.dictionaries(st.sampled_from(["RegTopic", "Reg2"]), config, max_size=2)})
    return st.one_of(wrapper.map(lambda d: json.dumps(d).encode()), st.binary(max_size=40))


def batch_body() -> st.SearchStrategy[bytes]:
    entry = st.builds(BatchEntry, st.integers(-(2**31), 2**31 - 1), st.binary(min_size=1, max_size=16),
                      plain_properties())
    return st.one_of(st.lists(entry, min_size=1, max_size=4).map(encode_batch), st.binary(max_size=40))


@dataclass
class Request:
    target: str  # "broker" or "namesrv"
    code: int
    ext: dict[str, str]
    body: bytes | None
    fields: list[Field] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # field key -> wire key


def _request(code: int, fields: list[Field], bodies: st.SearchStrategy[bytes | None], target: str = "broker",
             keys: dict[str, str] | None = None) -> st.SearchStrategy[Request]:
    wire = keys or {}

    def build(values: dict[str, str | None], body: bytes | None) -> Request:
        ext = {wire.get(k, k): v for k, v in values.items() if v is not None}
        return Request(target, code, ext, body, fields, wire)

    return st.builds(build, headers(fields), bodies)


SENDS = st.one_of(
    _request(RequestCode.SEND_MESSAGE, SEND_FIELDS, st.binary(min_size=1, max_size=32)),
    _request(RequestCode.SEND_MESSAGE_V2, SEND_FIELDS, st.binary(min_size=1, max_size=32), keys=V2_KEYS),
    _request(RequestCode.SEND_BATCH_MESSAGE, SEND_FIELDS, batch_body(), keys=V2_KEYS),
)
HOSTILE = st.one_of(
    SENDS, SENDS, SENDS,  # the requests that reach the store: most of them
    _request(RequestCode.PULL_MESSAGE, PULL_FIELDS, st.none()),
    _request(RequestCode.UPDATE_AND_CREATE_TOPIC, TOPIC_FIELDS, st.none()),
    _request(RequestCode.HEART_BEAT, [], heartbeat_body()),
    _request(RequestCode.REGISTER_BROKER, REGISTER_FIELDS, register_body(), target="namesrv"),
)
STEP = st.one_of(HOSTILE, st.integers(0, GOOD_QUEUES - 1))  # an int: a good send to that queue
STEPS = st.lists(STEP, min_size=1, max_size=10)


# -- the run --------------------------------------------------------------------------------

@dataclass
class Ack:
    """An acknowledged message: where the answer says it is."""

    topic: str
    queue_id: int
    queue_offset: int | None  # None: not in a queue of its topic (delayed, half, rolled back)
    msg_id: str


def _refused_values(request: Request) -> list[str]:
    """The wire keys of the header fields Java's parsers refuse."""
    refused = []
    for f in request.fields:
        key = request.keys.get(f.key, f.key)
        raw = request.ext.get(key)
        if raw is None:
            continue
        if (f.kind == "int" and not java_parses(raw, INT32)) or (f.kind == "long" and not java_parses(raw, INT64)):
            refused.append(key)
    return refused


def _delay_refused(request: Request) -> bool:
    """Whether Java refuses the send for its DELAY property: one its Integer.parseInt throws on,
    read for plain and committed messages (CommitLog.asyncPutMessage), or any positive level on
    a batch (asyncPutMessages)."""
    props = string_to_properties(request.ext.get(request.keys.get("properties", "properties"), ""))
    delay = props.get("DELAY")
    if delay is None:
        return False
    batch = request.code == RequestCode.SEND_BATCH_MESSAGE or \
        request.ext.get(request.keys.get("batch", "batch"), "").lower() == "true"
    if batch:
        return not java_parses(delay, INT32) or int(delay) > 0
    raw_sys_flag = request.ext.get(request.keys.get("sysFlag", "sysFlag"))
    if raw_sys_flag is None:  # refused for that
        return False
    return int(raw_sys_flag) & TRANSACTION_ROLLBACK_TYPE in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) \
        and not java_parses(delay, INT32)


def _acks(request: Request, response: RemotingCommand) -> list[Ack]:
    """The messages a SUCCESS answer to a send acknowledges."""
    ext = response.ext_fields or {}
    topic = request.ext.get(request.keys.get("topic", "topic"), "")
    props = string_to_properties(request.ext.get(request.keys.get("properties", "properties"), ""))
    sys_flag = int(request.ext.get(request.keys.get("sysFlag", "sysFlag"), "0"))
    queued = sys_flag & TRANSACTION_ROLLBACK_TYPE in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
    delay = props.get("DELAY", "0")
    delayed = bool(_JAVA_INTEGER.fullmatch(delay)) and int(delay) > 0
    in_queue = queued and not delayed and props.get("TRAN_MSG") != "true"
    first = int(ext["queueOffset"])
    ids = ext["msgId"].split(",")
    return [Ack(topic, int(ext["queueId"]), first + i if in_queue else None, msg_id) for i, msg_id in enumerate(ids)]


class Run:
    def __init__(self, daemons: DaemonSet, ns: Daemon, broker: Daemon, loop: asyncio.AbstractEventLoop) -> None:
        self.daemons, self.ns, self.broker, self.loop = daemons, ns, broker, loop
        self.client = RemotingClient()
        self.acks: list[Ack] = []
        self.refusals: list[tuple[int, str, str]] = []

    def call(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return self.loop.run_until_complete(self.client.invoke(addr, request, 10))

    def good_send(self, queue_id: int) -> None:
        response = self.call(self.broker.addr, send_request(GOOD_TOPIC, f"good-{len(self.acks)}".encode(),
                                                            queue_id=queue_id, tags="TagA"))
        assert response.code == ResponseCode.SUCCESS, f"a good send was refused: {response.code} {response.remark}"
        ext = response.ext_fields
        self.acks.append(Ack(GOOD_TOPIC, int(ext["queueId"]), int(ext["queueOffset"]), ext["msgId"]))

    def hostile(self, request: Request) -> None:
        addr = self.ns.addr if request.target == "namesrv" else self.broker.addr
        response = self.call(addr, RemotingCommand.request(request.code, dict(request.ext), request.body))
        refused = _refused_values(request)
        if refused:
            assert response.code != ResponseCode.SUCCESS, (
                f"{request.code} with {refused[0]}={request.ext[refused[0]]!r} (Java refuses it) was accepted")
            # The remark names the first field found wrong: a refused one or a missing one.
            wrong = [*refused, *(request.keys.get(f.key, f.key) for f in request.fields
                                 if request.keys.get(f.key, f.key) not in request.ext)]
            assert any(f"<{key}>" in (response.remark or "") for key in wrong), (
                f"the remark names none of {wrong}: {response.remark!r}")
        if response.code == ResponseCode.SYSTEM_ERROR:
            assert response.remark, f"SYSTEM_ERROR without a remark for {request.code} {request.ext}"
        if not refused:
            self.bounds_kept(request, response)
            if request.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
                assert not (_delay_refused(request) and response.code == ResponseCode.SUCCESS), (
                    f"a send with a DELAY Java refuses was acknowledged: {request.ext}")
        if request.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE) \
                and response.code == ResponseCode.SUCCESS:
            self.acks.extend(_acks(request, response))

    def bounds_kept(self, request: Request, response: RemotingCommand) -> None:
        """Counts a client controls are refused past their bounds, naming the field."""
        ext = request.ext
        if request.code == RequestCode.UPDATE_AND_CREATE_TOPIC:
            wrong = [key for key in ("readQueueNums", "writeQueueNums")
                     if key in ext and not 1 <= int(ext[key]) <= MAX_QUEUE_NUMS]
            if wrong:
                assert response.code != ResponseCode.SUCCESS, f"{wrong[0]}={ext[wrong[0]]} was accepted"
                # Named when nothing else is wrong (a missing field, a bad topic or filter type
                # would be named first).
                required = ("topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType")
                if (all(key in ext for key in required) and ext["topic"] in ("Scratch", "Scratch2")
                        and ext["topicFilterType"] in ("SINGLE_TAG", "MULTI_TAG")):
                    assert any(key in (response.remark or "") for key in wrong), response.remark
        if request.code == RequestCode.REGISTER_BROKER and "brokerId" in ext and not 0 <= int(ext["brokerId"]) < 2**31:
            assert response.code != ResponseCode.SUCCESS, f"brokerId={ext['brokerId']} was accepted"
            remark = response.remark or ""
            assert "<brokerId>" in remark or "is null" in remark, remark  # or a missing field named first
        if request.code == RequestCode.REGISTER_BROKER:  # whatever was registered, routes stay bounded
            for topic in ("RegTopic", "Reg2"):
                route = self.call(self.ns.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                        {"topic": topic}))
                if route.code == ResponseCode.SUCCESS:
                    for qd in TopicRouteData.decode(route.body or b"").queueDatas:
                        assert 0 <= qd.readQueueNums <= MAX_QUEUE_NUMS and 0 <= qd.writeQueueNums <= MAX_QUEUE_NUMS

    def check(self) -> None:
        """Both daemons up, and every acknowledged message where its answer said."""
        assert self.ns.alive(), "the NameServer died:\n" + "\n".join(self.ns.lines[-20:])
        assert self.broker.alive(), "the broker died:\n" + "\n".join(self.broker.lines[-20:])
        by_queue: dict[tuple[str, int], dict[int, str]] = {}
        for ack in self.acks:
            if ack.queue_offset is not None:
                by_queue.setdefault((ack.topic, ack.queue_id), {})[ack.queue_offset] = ack.msg_id
        for (topic, queue_id), wanted in by_queue.items():
            found = self.read_queue(topic, queue_id, min(wanted), max(wanted) + 1)
            for offset, msg_id in sorted(wanted.items()):
                assert found.get(offset) == msg_id, (
                    f"{topic}/{queue_id}: acknowledged {msg_id} at offset {offset}, read {found.get(offset)}")
        for ack in self.acks:
            if ack.queue_offset is None:  # still stored where its id says
                _, phys = decode_offset_msg_id(ack.msg_id)
                response = self.call(self.broker.addr, RemotingCommand.request(
                    RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys)}))
                assert response.code == ResponseCode.SUCCESS, f"{ack} is gone: {response.remark}"

    def read_queue(self, topic: str, queue_id: int, begin: int, end: int) -> dict[int, str]:
        found: dict[int, str] = {}
        offset = begin
        while offset < end:
            response = self.call(self.broker.addr, pull_request("checker", topic, queue_id, offset))
            assert response.code == ResponseCode.SUCCESS, (
                f"pull {topic}/{queue_id}@{offset}: {response.code} {response.remark}")
            msgs = list(decode_records(response.body or b""))
            assert msgs, f"pull {topic}/{queue_id}@{offset} found nothing"
            # A pull of every tag answers the queue's units in order from ``offset``: the i-th
            # message is the one at offset + i, whatever its record says.
            for i, m in enumerate(msgs):
                found[offset + i] = m.offset_msg_id
                assert m.queue_offset == offset + i, (
                    f"{topic}/{queue_id}@{offset + i} holds a record of offset {m.queue_offset}")
            offset += len(msgs)
        return found

    def restart_broker(self) -> None:
        assert self.broker.stop() == 0, "the broker did not stop cleanly"
        self.daemons.started.remove(self.broker)
        self.broker = self.daemons.broker(self.ns.addr, *BROKER_OPTIONS)


def test_hostile_requests_never_hide_or_lose_acknowledged_messages(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, *BROKER_OPTIONS)
    loop = asyncio.new_event_loop()
    run = Run(daemons, ns, broker, loop)
    try:
        created = run.call(broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": GOOD_TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(GOOD_QUEUES),
            "writeQueueNums": str(GOOD_QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG"}))
        assert created.code == ResponseCode.SUCCESS, created.remark

        # No shrinking: the daemons keep their state between examples, so once one breaks a
        # queue every later example fails too, and the first failure is the one to report.
        @settings(max_examples=150, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(STEPS)
        def batch(steps: list[Request | int]) -> None:
            for step in steps:
                if isinstance(step, int):
                    run.good_send(step)
                else:
                    run.hostile(step)
            for queue_id in range(GOOD_QUEUES):  # an offset a refused send took shows as a gap
                run.good_send(queue_id)
            run.check()

        batch()
        run.check()
        run.restart_broker()
        run.check()
        for queue_id in range(GOOD_QUEUES):  # offsets handed out after the restart are new ones
            run.good_send(queue_id)
        run.check()
    finally:
        loop.run_until_complete(run.client.close())
        loop.close()
