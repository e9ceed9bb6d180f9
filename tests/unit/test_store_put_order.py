"""A put takes its queue offset only once its records are built and fit: a put refused for a
field its record cannot hold leaves the queue table, the log and the ConsumeQueues as they were,
for single puts, runs and batches alike (issue 20). Puts with such fields are drawn among good
ones; every stored message is then read back at the queue offset its put answered, before and
after the store is reopened."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.message import decode_record
from rocketmq_py.store.commit_log import MessageExtBatch, MessageExtBrokerInner, RunEntry
from rocketmq_py.store.message_store import DefaultMessageStore, PutMessageResult, PutMessageStatus
from tests.store_helpers import STORE_HOST, small_config

TOPIC = "Order"
QUEUES = 3
BORN_HOST = ("10.1.2.3", 5555)


def _field(bits: int) -> st.SearchStrategy[int]:
    """Mostly values the record holds; sometimes any size."""
    bound = 2 ** (bits - 1)
    return st.one_of(st.integers(-bound, bound - 1), st.integers(-bound, bound - 1),
                     st.integers(-(2**70), 2**70), st.sampled_from([bound, -bound - 1]))


@dataclass
class Put:
    queue_id: int
    body: bytes
    flag: int
    sys_flag: int
    born_timestamp: int
    reconsume_times: int


# Host address bits too: the store sets those from the hosts it writes, whatever a sender said.
SYS_FLAGS = st.one_of(st.sampled_from([0, 0x1, 0x8, 0x10, 0x20, 0x30]), _field(32))
PUTS = st.builds(Put, st.one_of(st.integers(0, QUEUES - 1), st.integers(0, QUEUES - 1), _field(32)),
                 st.binary(min_size=1, max_size=3000), _field(32), SYS_FLAGS, _field(64), _field(32))
OPS = st.lists(st.one_of(st.tuples(st.just("single"), PUTS), st.tuples(st.just("run"), st.lists(PUTS, min_size=1,
                                                                                                  max_size=4)),
                         st.tuples(st.just("batch"), st.lists(PUTS, min_size=1, max_size=3))),
               min_size=1, max_size=12)


def _state(store: DefaultMessageStore) -> tuple[object, ...]:
    log = store.commit_log
    # Units, not queue objects: a put may reserve its queue's file space before it is refused.
    queues = {(topic, qid): (cq.max_offset_in_queue, cq.max_physic_offset)
              for topic, table in store.consume_queue_table.items() for qid, cq in table.items()
              if cq.max_offset_in_queue or cq.max_physic_offset >= 0}
    return dict(log.topic_queue_table), log.max_offset, len(log.queue.files), queues


def _put(store: DefaultMessageStore, kind: str, puts: list[Put]) -> PutMessageResult:
    if kind == "single":
        (p,) = puts
        return store.append_message(MessageExtBrokerInner(
            TOPIC, p.body, p.queue_id, p.flag, "TAGS\x01a", 0, p.sys_flag, p.born_timestamp, BORN_HOST, STORE_HOST,
            p.reconsume_times))
    if kind == "run":
        entries: list[RunEntry] = [(TOPIC, p.queue_id, p.body, p.flag, b"TAGS\x01a", 0, p.sys_flag, p.born_timestamp,
                                    p.reconsume_times, 0) for p in puts]
        return store.append_run(entries, BORN_HOST, STORE_HOST)
    first = puts[0]  # a batch has one queue, sysFlag, born time and reconsume times
    return store.append_messages(MessageExtBatch(
        TOPIC, first.queue_id, [(p.flag, p.body, b"TAGS\x01a", 0) for p in puts], first.sys_flag,
        first.born_timestamp, BORN_HOST, STORE_HOST, first.reconsume_times))


def _queued(sys_flag: int) -> bool:
    return sys_flag & 0xC in (0, 0x8)


def _read_back(store: DefaultMessageStore, stored: dict[tuple[int, int], bytes]) -> None:
    for (queue_id, queue_offset), body in stored.items():
        got = store.get_message("g", TOPIC, queue_id, queue_offset, 1)
        assert got.buffers, f"{TOPIC}/{queue_id}@{queue_offset}: {got.status}"
        record = decode_record(got.buffers[0], check_crc=True)
        assert (record.queue_offset, record.body) == (queue_offset, body)


async def _scenario(root: str, ops: list[tuple[str, object]]) -> None:
    store = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    stored: dict[tuple[int, int], bytes] = {}
    try:
        for kind, drawn in ops:
            puts = [drawn] if isinstance(drawn, Put) else list(drawn)  # type: ignore[call-overload]
            before = _state(store)
            result = _put(store, kind, puts)
            append = result.append_result
            if result.status is not PutMessageStatus.PUT_OK or append is None:
                assert _state(store) == before, f"a refused {kind} ({result.status}) changed the store"
                continue
            if kind == "batch":
                offsets = [append.logics_offset + i for i in range(len(puts))]
                flags = [puts[0].sys_flag] * len(puts)
                queue_ids = [puts[0].queue_id] * len(puts)
            else:
                offsets, flags, queue_ids = list(append.queue_offsets), [p.sys_flag for p in puts], \
                    [p.queue_id for p in puts]
            for p, queue_id, queue_offset, sys_flag in zip(puts, queue_ids, offsets, flags, strict=True):
                if _queued(sys_flag):
                    assert (queue_id, queue_offset) not in stored, "a queue offset handed out twice"
                    stored[queue_id, queue_offset] = p.body
        _read_back(store, stored)
        table = {key: next_offset for key, next_offset in store.commit_log.topic_queue_table.items() if next_offset}
    finally:
        await store.shutdown()
    reopened = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False))
    await reopened.load()
    await reopened.start()
    try:
        # A queue reserved but never written is rebuilt at offset 0, as good as absent.
        assert {key: n for key, n in reopened.commit_log.topic_queue_table.items() if n} == table
        _read_back(reopened, stored)
    finally:
        await reopened.shutdown()


@settings(max_examples=40, deadline=None)
@given(OPS)
def test_a_refused_put_takes_nothing_and_every_stored_message_is_at_its_offset(ops: list[tuple[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_scenario(root, ops))
