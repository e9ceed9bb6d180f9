"""SEND_BATCH_MESSAGE's entries as stored (broker/processors/send.py's _batch): each entry's own
properties, then the header's it lacks and CLUSTER, and its tags' hash in its ConsumeQueue unit,
whatever properties the other entries of the batch repeat (each distinct one is merged once)."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketmq_py.broker.processors import send
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.batch_body import (
    Maker,
    Merge,
    StoredEntry,
    split_batch,
    walk_by_bytes,
    walk_by_struct,
)
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeader, SendMessageRequestHeaderV2
from rocketmq_py.remoting.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    BatchEntry,
    RecordError,
    decode_offset_msg_id,
    decode_record,
    encode_batch,
    properties_to_string,
    string_to_properties,
    tags_string_to_tags_code,
)
from rocketmq_py.store.commit_log import CommitLog
from tests.unit.send_helpers import send_processor, unconnected

NAMES = ["TAGS", "KEYS", "A", "B", "CLUSTER"]
VALUES = st.text("abc xyz012", min_size=1, max_size=6)
PROPERTIES = st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=4)


def _expected(own: dict[str, str], header: dict[str, str]) -> dict[str, str]:
    """What a stored entry holds: its own properties (CLUSTER is the broker's), the header's it
    lacks (not WAIT), and the broker's CLUSTER."""
    kept = {k: v for k, v in own.items() if k != "CLUSTER"}
    filled = {k: v for k, v in header.items() if k not in ("WAIT", "CLUSTER") and k not in kept}
    return {**kept, **filled, "CLUSTER": "C1"}


@settings(max_examples=40, deadline=None)
@given(pool=st.lists(PROPERTIES, min_size=1, max_size=3),
       picks=st.lists(st.integers(0, 2), min_size=1, max_size=12),
       header=PROPERTIES.map(lambda p: {**p, "WAIT": "true"}))
async def test_each_entry_keeps_its_own_properties_and_takes_the_headers_it_lacks(
        tmp_path_factory: Any, pool: list[dict[str, str]], picks: list[int], header: dict[str, str]) -> None:
    chosen = [pool[i % len(pool)] for i in picks]  # entries repeating a few properties, as producers send
    entries = [BatchEntry(i, f"body-{i}".encode(), properties_to_string(own)) for i, own in enumerate(chosen)]
    v1 = SendMessageRequestHeader(producerGroup="pg", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4,
                                  queueId=2, sysFlag=0, bornTimestamp=1700000000123, flag=0,
                                  properties=properties_to_string(header), batch=True)
    request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, SendMessageRequestHeaderV2.from_v1(v1),
                                      encode_batch(entries))
    async with send_processor(tmp_path_factory.mktemp("store")) as processor:
        response = processor.process_request(unconnected(), request)
        assert isinstance(response, RemotingCommand)
        assert response.code == ResponseCode.SUCCESS, response.remark
        ext = response.ext_fields or {}
        store = processor.broker.message_store
        first = int(ext["queueOffset"])
        cq = store.find_consume_queue("T", 2)
        for i, (msg_id, entry, own) in enumerate(zip(ext["msgId"].split(","), entries, chosen, strict=True)):
            data = store.look_message_by_offset(decode_offset_msg_id(msg_id)[1])
            assert data is not None
            stored = decode_record(data)
            expected = _expected(own, header)
            assert (stored.body, stored.flag, stored.queue_offset) == (entry.body, entry.flag, first + i)
            assert stored.properties == expected
            # the properties as stored: the record's last bytes, after the body, topic and length
            at = data.index(entry.body) + len(entry.body)
            raw = data[at + 1 + data[at] + 2:].decode()
            assert string_to_properties(raw) == expected and "\x02\x02" not in raw and not raw.endswith("\x02")
            unit = cq.unit_at(first + i)
            assert unit is not None and unit[2] == tags_string_to_tags_code(expected.get("TAGS"))


_BROKEN = st.sampled_from(["truncated", "body length", "size"])


def _break(body: bytes, how: str) -> bytes:
    """``body`` with its last entry's structure broken: cut short, its body length past the end,
    or its total size not matching its lengths."""
    last = len(body) - len(encode_batch([BatchEntry(0, b"last", "")]))
    if how == "truncated":
        return body[:last + 10]
    if how == "body length":
        return body[:last + 16] + (1 << 20).to_bytes(4, "big") + body[last + 20:]
    return (len(body) - last + 1).to_bytes(4, "big").join((body[:last], body[last + 4:]))


@settings(max_examples=40, deadline=None)
@given(entry_delayed=st.booleans(), header_transactional=st.booleans(), broken=st.one_of(st.none(), _BROKEN),
       position=st.integers(0, 3))
async def test_a_refused_batch_is_answered_structure_first_then_header_then_entries_and_stores_nothing(
        tmp_path_factory: Any, entry_delayed: bool, header_transactional: bool, broken: str | None,
        position: int) -> None:
    """The body is walked once, each distinct properties merged as the walk meets them, yet the
    answer names what is wrong in a fixed order: a malformed body anywhere (even after an entry
    whose properties are refused), then the header's delay or transaction, then an entry's
    properties."""
    entries = [BatchEntry(0, f"body-{i}".encode(), "TAGS\x01a") for i in range(4)]
    if entry_delayed:
        entries[position] = BatchEntry(0, b"delayed", "TAGS\x01a\x02DELAY\x013")
    body = encode_batch([*entries, BatchEntry(0, b"last", "")])
    if broken is not None:
        body = _break(body, broken)
    v1 = SendMessageRequestHeader(producerGroup="pg", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4,
                                  queueId=1, sysFlag=TRANSACTION_PREPARED_TYPE if header_transactional else 0,
                                  bornTimestamp=1700000000123, flag=0, properties="WAIT\x01true", batch=True)
    request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, SendMessageRequestHeaderV2.from_v1(v1), body)
    async with send_processor(tmp_path_factory.mktemp("store")) as processor:
        store = processor.broker.message_store
        before = store.commit_log.max_offset
        response = processor.process_request(unconnected(), request)
        assert isinstance(response, RemotingCommand)
        if broken is None and not entry_delayed and not header_transactional:
            assert response.code == ResponseCode.SUCCESS, response.remark
            return
        assert response.code == ResponseCode.MESSAGE_ILLEGAL
        remark = response.remark or ""
        if broken is not None:
            assert remark.startswith("the batch body is malformed: ") and "batch entry" in remark, remark
        else:
            assert remark == "batch messages cannot be delayed or transactional", remark
        assert store.commit_log.max_offset == before
        assert store.find_consume_queue("T", 1).max_offset_in_queue == 0


_PAIR_RAW = st.one_of(
    st.sampled_from([b"TAGS\x01t", b"KEYS\x01k", b"CLUSTER\x01C", b"CLUSTER\x01C1", b"A\x011", b"DELAY\x011",
                     b"TRAN_MSG\x01true", b"UNIQ_KEY\x01u"]),
    st.tuples(st.sampled_from([b"TAGS", b"CLUSTER", b"DELAY", b"UNIQ_KEY", b"MYUNIQ_KEY", b""]),
              st.sampled_from([b"", b"0", b"\xc3\xa9", b"\xff"])).map(b"\x01".join))
_PAIRS = st.lists(_PAIR_RAW, max_size=3)
# A UNIQ_KEY's value: mostly a producer's id, sometimes what the walk's shortcut must not take.
_UNIQ_VALUES = st.one_of(st.text("0123456789ABCDEF", min_size=1, max_size=6).map(str.encode),
                         st.sampled_from([b"", b"x\x01y", b"\xc3\xa9", b"\xff", b"a\x02TAGS\x01z", b"DELAY\x013"]),
                         st.binary(max_size=4))
# What the header may hold: a producer's own UNIQ_KEY for the batch (Java's), tags, keys, a delay.
_HEADER = st.dictionaries(st.sampled_from(["UNIQ_KEY", "UNIQ_KEY", "TAGS", "KEYS", "DELAY", "CLUSTER"]),
                          st.sampled_from(["h", "0", "2"]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(shapes=st.lists(st.tuples(_PAIRS, _PAIRS, st.booleans()), min_size=1, max_size=2),
       picks=st.lists(st.tuples(st.integers(0, 1), _UNIQ_VALUES), min_size=1, max_size=10), header=_HEADER)
# The entry's CLUSTER rewritten, its UNIQ_KEY then elsewhere; an empty UNIQ_KEY, filled from the header.
@example(shapes=[([b"CLUSTER\x01C"], [], False)], picks=[(0, b"AB"), (0, b"CD")], header={})
@example(shapes=[([b"TAGS\x01t"], [], False)], picks=[(0, b""), (0, b"CD")], header={"UNIQ_KEY": "h"})
# Properties of one length, like the previous but for what precedes the UNIQ_KEY or what follows it.
@example(shapes=[([b"TAGS\x01t"], [], False), ([b"TAGS\x010"], [], False)], picks=[(0, b"AB"), (1, b"CD")], header={})
@example(shapes=[([], [b"TAGS\x01t"], False), ([], [b"TAGS\x010"], False)], picks=[(0, b"AB"), (1, b"CD")], header={})
async def test_entries_differing_only_by_their_uniq_key_are_stored_as_if_each_were_merged_alone(
        tmp_path_factory: Any, shapes: list[tuple[list[bytes], list[bytes], bool]], picks: list[tuple[int, bytes]],
        header: dict[str, str]) -> None:
    """The walk merges properties that differ from merged ones only by their UNIQ_KEY's value
    by appending what it appended to those (batch_body._merged): every batch's walk, in both
    spellings, gives what merging each entry on its own gives, refusal included."""
    entries = []
    for i, (shape, value) in enumerate(picks):
        before, after, trailing = shapes[shape % len(shapes)]
        raw = b"\x02".join([*before, b"UNIQ_KEY\x01" + value, *after]) + (b"\x02" if trailing else b"")
        entries.append(_raw_entry(i, raw))
    body = b"".join(entries)
    checked = []

    def walk_checked(walked: bytes, merge: Merge, maker: Maker,
                     keyed: dict[bytes, tuple[bytes, int]] | None = None) -> object:
        alone: list[StoredEntry] = []
        refused = None
        for flag, data, props in split_batch(walked):
            try:
                alone.append((flag, data, *merge(props)))
            except RecordError as exc:
                refused = refused or str(exc)
                alone.append((flag, data, props, 0))
        # The records of each entry merged alone, built one by one by the store.
        parts, fields, size, keyless, refusal = CommitLog._build_batch(alone, maker)
        for walk in (walk_by_struct, walk_by_bytes):
            (w_parts, w_fields, w_size, w_keyless, w_refusal), bad = walk(walked, merge, maker)
            assert (None if bad is None else str(bad)) == refused
            assert w_refusal == refusal
            if not refusal:
                assert (b"".join(w_parts), w_fields, w_size, w_keyless) == (b"".join(parts), fields, size, keyless)
        checked.append(len(alone))
        return walk_by_struct(walked, merge, maker, keyed)

    v1 = SendMessageRequestHeader(producerGroup="pg", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4,
                                  queueId=0, sysFlag=0, bornTimestamp=1700000000123, flag=0,
                                  properties=properties_to_string(header), batch=True)
    request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, SendMessageRequestHeaderV2.from_v1(v1), body)
    async with send_processor(tmp_path_factory.mktemp("store")) as processor:
        with mock.patch.object(send, "split_batch_merged", walk_checked):
            response = processor.process_request(unconnected(), request)
        assert isinstance(response, RemotingCommand)
        assert checked == [len(picks)]


def _raw_entry(flag: int, props: bytes) -> bytes:
    """A batch entry of raw properties (any bytes, as a hostile producer may send)."""
    body = b"body"
    return (22 + len(body) + len(props)).to_bytes(4, "big") + bytes(8) + flag.to_bytes(4, "big") + \
        len(body).to_bytes(4, "big") + body + len(props).to_bytes(2, "big") + props


_HEADERS = st.sampled_from(["", "WAIT\x01true", "WAIT\x01true\x02A\x01h", "DELAY\x012", "DELAY\x01x",
                            "DELAY\x010\x02B\x01h", "CLUSTER\x01other\x02KEYS\x01k"])
_ENTRY_PROPS = st.sampled_from([b"", b"TAGS\x01t", b"TAGS\x01t\x02A\x01own", b"A\x01a\x02", b"CLUSTER\x01C",
                                b"TRAN_MSG\x01true", b"DELAY\x011", b"TAGS\x01\xff", b"TAGS\x01t\x02UNIQ_KEY\x01AB",
                                b"TAGS\x01t\x02UNIQ_KEY\x01CD", b"UNIQ_KEY\x01EF\x02A\x01own", b"UNIQ_KEY\x01G\xff"])


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.tuples(_HEADERS, st.booleans(), st.sampled_from(["C1", "C2"]),
                                  st.lists(_ENTRY_PROPS, min_size=0, max_size=4)), min_size=1, max_size=8))
async def test_what_earlier_batches_merged_is_what_a_fresh_processor_merges(
        tmp_path_factory: Any, batches: list[tuple[str, bool, str, list[bytes]]]) -> None:
    """The processor keeps, by header properties and cluster name, what they make of entries'
    properties and the merges done (_batch_merging): batch after batch -- header properties that
    refuse (a delay level) or not, transactional batches, the cluster name changed between them,
    entries refused for their own properties, entries differing only by their UNIQ_KEY's value --
    each batch's entries, or its refusal, are what a processor that kept nothing gives."""
    async with send_processor(tmp_path_factory.mktemp("store")) as processor:
        topic_config = processor.broker.topic_config_manager.select_topic_config("T")
        assert topic_config is not None
        conn = unconnected()
        for properties, transactional, cluster, props in batches:
            processor.broker.broker_config.brokerClusterName = cluster
            header = SendMessageRequestHeader(producerGroup="pg", topic="T", defaultTopic="TBW102",
                                              defaultTopicQueueNums=4, queueId=0,
                                              sysFlag=TRANSACTION_PREPARED_TYPE if transactional else 0,
                                              bornTimestamp=1700000000123, flag=0, properties=properties, batch=True)
            body = b"".join(_raw_entry(i, p) for i, p in enumerate(props))
            answers: list[object] = []
            for proc in (processor, send.SendMessageProcessor(processor.broker)):
                try:
                    batch = proc._batch(conn, header, 0, body, topic_config)
                except RecordError as exc:
                    answers.append(str(exc))
                else:
                    answers.append([(flag, bytes(data), stored, code) for flag, data, stored, code in batch.entries])
            assert answers[0] == answers[1]
