"""Transactional messages against real daemons: commit, rollback, check-back, a dead producer,
the check limit, and END_TRANSACTION bad input.

The broker runs with short transaction timings (timeout 2 s, a check round every 0.5 s, at most
4 checks) so every check-back happens within seconds. Visibility is read with raw pulls of the
real queue; "settled" is read from the op topic, the broker's own record of outcomes.
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from rocketmq_py.client import LocalTransactionState, Message, TransactionProducer, TransactionSendResult
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.message import MessageConst, MessageExt, decode_offset_msg_id, decode_records
from rocketmq_py.remoting.protocol.transaction import EndTransactionRequestHeader
from tests.integration.broker_client import call, pull_request, send_request
from tests.integration.daemons import Daemon, DaemonSet
from tests.waiting import wait_for_async, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
CHECK_MAX = 4
S = LocalTransactionState


# The settings of the broker of the shared ``cluster`` fixture (tests/integration/conftest.py).
BROKER_OPTIONS = ("transactionTimeOut=2000", "transactionCheckInterval=500", f"transactionCheckMax={CHECK_MAX}")


@pytest.fixture
async def raw() -> object:
    client = RemotingClient()
    yield client
    await client.close()


class Listener:
    """Answers the local transaction and the checks as told, and records the checks."""

    def __init__(self, execute: LocalTransactionState | None, check: LocalTransactionState | None = None) -> None:
        self.execute = execute
        self.check = check
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState | None:
        return self.execute

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState | None:
        self.checked.append(msg)
        return self.check


async def pulled(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message in a queue, read from offset 0 (bounded: the queues here stay small)."""
    found: list[MessageExt] = []
    offset = 0
    for _ in range(100):
        response = await client.invoke(addr, pull_request("trans_reader", topic, queue_id, offset, max_nums=32), 5)
        if response.code != ResponseCode.SUCCESS or not response.body:
            return found
        batch = list(decode_records(response.body))
        found.extend(batch)
        offset = batch[-1].queue_offset + 1
    return found


async def visible(client: RemotingClient, addr: str, result: TransactionSendResult) -> list[MessageExt]:
    msgs = await pulled(client, addr, result.message_queue.topic, result.message_queue.queue_id)
    return [m for m in msgs if m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == result.msg_id]


async def settled_offsets(client: RemotingClient, addr: str) -> set[int]:
    """Half-queue offsets the broker has an outcome for (op records' bodies)."""
    return {int(m.body) for m in await pulled(client, addr, OP_TOPIC, 0)}


async def max_offset(client: RemotingClient, addr: str, topic: str, queue_id: int) -> int:
    response = await call(client, addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    return int((response.ext_fields or {}).get("offset", "0")) if response.code == ResponseCode.SUCCESS else 0


async def test_commit_is_visible_on_the_real_topic(cluster: tuple[Daemon, Daemon], raw: RemotingClient) -> None:
    ns, broker = cluster
    listener = Listener(S.COMMIT_MESSAGE)
    async with TransactionProducer("pg_trans_commit", ns.addr, transaction_listener=listener) as producer:
        result = await producer.send_message_in_transaction(Message("TransCommit", b"paid", tags="T", keys="k1"))
        assert result.local_transaction_state is S.COMMIT_MESSAGE
        assert result.transaction_id == result.msg_id
        assert await wait_for_async(lambda: visible(raw, broker.addr, result), 10)
    [msg] = await visible(raw, broker.addr, result)
    assert msg.body == b"paid" and msg.tags == "T" and msg.keys == "k1"
    assert msg.sys_flag & 0xC == 0x8, "a committed message carries COMMIT_TYPE"
    assert msg.properties[MessageConst.TRANSACTION_PREPARED] == "true"
    assert msg.properties[MessageConst.PRODUCER_GROUP] == "pg_trans_commit"
    half_offset = decode_offset_msg_id(result.offset_msg_id)[1]
    assert msg.prepared_transaction_offset == half_offset
    # The half message itself sits in the half topic, queue 0, transaction bits reset.
    halves = [m for m in await pulled(raw, broker.addr, HALF_TOPIC, 0)
              if m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == result.msg_id]
    assert halves and halves[0].properties[MessageConst.REAL_TOPIC] == "TransCommit"
    assert halves[0].properties[MessageConst.REAL_QUEUE_ID] == str(result.message_queue.queue_id)
    assert halves[0].sys_flag & 0xC == 0
    assert result.queue_offset in await settled_offsets(raw, broker.addr)
    assert listener.checked == [], "a committed transaction is never checked"


async def test_rollback_is_never_visible(cluster: tuple[Daemon, Daemon], raw: RemotingClient) -> None:
    ns, broker = cluster
    rolled = Listener(S.ROLLBACK_MESSAGE, S.COMMIT_MESSAGE)
    async with TransactionProducer("pg_trans_rollback", ns.addr, transaction_listener=rolled) as producer:
        result = await producer.send_message_in_transaction(Message("TransRollback", b"cancelled"))
        assert result.local_transaction_state is S.ROLLBACK_MESSAGE
        assert await wait_for_async(lambda: _contains(settled_offsets(raw, broker.addr), result.queue_offset), 10)
        # A later unknown transaction of the same group, committed by its check: once it is
        # visible, check rounds have passed the rolled-back half message.
        rolled.execute = S.UNKNOW
        sentinel = await producer.send_message_in_transaction(Message("TransRollback", b"sentinel"))
        assert await wait_for_async(lambda: visible(raw, broker.addr, sentinel), 15)
    assert await visible(raw, broker.addr, result) == []
    assert [m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in rolled.checked] == [sentinel.msg_id]


async def _contains(probe, item: int) -> bool:  # type: ignore[no-untyped-def]
    return item in await probe


@pytest.mark.parametrize("answer", [S.COMMIT_MESSAGE, S.ROLLBACK_MESSAGE])
async def test_unknown_is_checked_back_and_the_answer_decides(cluster: tuple[Daemon, Daemon], raw: RemotingClient,
                                                              answer: LocalTransactionState) -> None:
    ns, broker = cluster
    listener = Listener(S.UNKNOW, answer)
    topic = f"TransUnknown{answer.value.split('_')[0].title()}"
    async with TransactionProducer(f"pg_trans_{answer.value}", ns.addr, transaction_listener=listener) as producer:
        result = await producer.send_message_in_transaction(Message(topic, b"maybe"))
        assert result.local_transaction_state is S.UNKNOW
        assert await wait_until(lambda: len(listener.checked) >= 1, 15), "the broker never checked back"
        checked = listener.checked[0]
        assert checked.topic == topic and checked.queue_id == result.message_queue.queue_id
        assert checked.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == result.msg_id
        assert checked.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
        assert checked.body == b"maybe"
        if answer is S.COMMIT_MESSAGE:
            assert await wait_for_async(lambda: visible(raw, broker.addr, result), 10)
            assert len(await visible(raw, broker.addr, result)) == 1
        else:
            # The check's END names the re-put copy; its offset shows up among the settled ones.
            assert await wait_for_async(lambda: _settled_after(raw, broker.addr, result.queue_offset), 10)
            assert await visible(raw, broker.addr, result) == []
    assert len(listener.checked) == 1, "an answered transaction is not checked again"


async def _settled_after(raw: RemotingClient, addr: str, offset: int) -> bool:
    return any(o > offset for o in await settled_offsets(raw, addr))


async def test_a_peer_answers_for_a_killed_producer(cluster: tuple[Daemon, Daemon], raw: RemotingClient) -> None:
    ns, broker = cluster
    topic, group = "TransOrphan", "pg_trans_orphan"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(ROOT, "tests", "integration", "trans_producer_script.py"), ns.addr, topic, group,
        stdout=asyncio.subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("HALF "), line
    finally:
        # SIGKILL: no unregister, no shutdown; the broker learns only from the closed connection.
        proc.kill()
        await asyncio.wait_for(proc.wait(), 10)
    _, msg_id, queue_id, _ = line.split()
    peer = Listener(S.COMMIT_MESSAGE, S.COMMIT_MESSAGE)
    async with TransactionProducer(group, ns.addr, transaction_listener=peer):
        assert await wait_until(lambda: len(peer.checked) >= 1, 20), "no check reached the surviving producer"
        assert peer.checked[0].properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == msg_id

        async def arrived() -> list[MessageExt]:
            return [m for m in await pulled(raw, broker.addr, topic, int(queue_id))
                    if m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == msg_id]

        assert await wait_for_async(arrived, 10)
        # Bounded: two more check rounds' worth of waiting for a second copy that must not come.
        assert not await wait_for_async(lambda: _count_is(arrived(), 2), 1.5)
    assert [m.body for m in await arrived()] == [b"from-the-dead"], "visible exactly once"


async def _count_is(probe, n: int) -> bool:  # type: ignore[no-untyped-def]
    return len(await probe) >= n


async def test_checked_too_often_is_discarded(cluster: tuple[Daemon, Daemon], raw: RemotingClient) -> None:
    ns, broker = cluster
    listener = Listener(S.UNKNOW, S.UNKNOW)
    async with TransactionProducer("pg_trans_undecided", ns.addr, transaction_listener=listener) as producer:
        result = await producer.send_message_in_transaction(Message("TransUndecided", b"forever"))

        async def discarded() -> bool:
            return any(m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == result.msg_id
                       for m in await pulled(raw, broker.addr, CHECK_MAX_TOPIC, 0))

        assert await wait_for_async(discarded, 20)
        assert len(listener.checked) == CHECK_MAX
        assert [m.properties[MessageConst.TRANSACTION_CHECK_TIMES] for m in listener.checked] == [
            str(i) for i in range(1, CHECK_MAX + 1)]
    assert await visible(raw, broker.addr, result) == []


def _end(group: str, table_offset: int, commit_log_offset: int, outcome: int = 8) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.END_TRANSACTION, EndTransactionRequestHeader(
        producerGroup=group, tranStateTableOffset=table_offset, commitLogOffset=commit_log_offset,
        commitOrRollback=outcome, msgId="X"))


async def test_end_transaction_bad_input_changes_nothing(cluster: tuple[Daemon, Daemon],
                                                         raw: RemotingClient) -> None:
    ns, broker = cluster
    listener = Listener(S.UNKNOW, S.UNKNOW)
    async with TransactionProducer("pg_trans_bad", ns.addr, transaction_listener=listener) as producer:
        result = await producer.send_message_in_transaction(Message("TransBad", b"half"))
    half = decode_offset_msg_id(result.offset_msg_id)[1]
    plain = await raw.invoke(broker.addr, send_request("TransBadPlain", b"ordinary", queue_id=0), 5)
    assert plain.code == ResponseCode.SUCCESS
    plain_offset = decode_offset_msg_id(plain.ext_fields["msgId"])[1]  # type: ignore[index]
    queue = result.message_queue.queue_id
    before = (await max_offset(raw, broker.addr, "TransBad", queue), await max_offset(raw, broker.addr, OP_TOPIC, 0),
              await max_offset(raw, broker.addr, "TransBadPlain", 0))
    cases = [
        (_end("pg_trans_bad", result.queue_offset, 1 << 40), "Find prepared transaction message failed"),
        (_end("pg_trans_bad", 0, plain_offset), "Find prepared transaction message failed"),
        (_end("pg_other", result.queue_offset, half), "The producer group wrong"),
        (_end("pg_trans_bad", result.queue_offset + 1000, half), "The transaction state table offset wrong"),
        (_end("pg_trans_bad", result.queue_offset, half, outcome=5), "commitOrRollback 5"),
        (RemotingCommand.request(RequestCode.END_TRANSACTION, {"producerGroup": "pg_trans_bad"}), "tranStateTable"),
    ]
    for request, remark in cases:
        response = await raw.invoke(broker.addr, request, 5)
        assert response.code == ResponseCode.SYSTEM_ERROR, (remark, response)
        assert remark in (response.remark or ""), response.remark
    after = (await max_offset(raw, broker.addr, "TransBad", queue), await max_offset(raw, broker.addr, OP_TOPIC, 0),
             await max_offset(raw, broker.addr, "TransBadPlain", 0))
    assert after == before, "a refused END_TRANSACTION wrote nothing"
    # The half message is still pending: a correct END commits it.
    good = await raw.invoke(broker.addr, _end("pg_trans_bad", result.queue_offset, half), 5)
    assert good.code == ResponseCode.SUCCESS, good.remark
    assert len(await visible(raw, broker.addr, result)) == 1


async def test_reject_transaction_message(daemons: DaemonSet, raw: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, "rejectTransactionMessage=true")
    listener = Listener(S.COMMIT_MESSAGE)
    async with TransactionProducer("pg_trans_reject", ns.addr, transaction_listener=listener,
                                   retry_times_when_send_failed=0) as producer:
        with pytest.raises(Exception, match="transaction message is forbidden"):
            await producer.send_message_in_transaction(Message("TransRejected", b"no"))
    assert await max_offset(raw, broker.addr, HALF_TOPIC, 0) == 0


async def test_a_pending_half_message_survives_a_broker_restart(daemons: DaemonSet, raw: RemotingClient) -> None:
    ns = daemons.namesrv()
    options = ("transactionTimeOut=2000", "transactionCheckInterval=500")
    broker = daemons.broker(ns.addr, *options)
    undecided = Listener(S.UNKNOW, S.UNKNOW)
    async with TransactionProducer("pg_trans_restart", ns.addr, transaction_listener=undecided) as producer:
        result = await producer.send_message_in_transaction(Message("TransRestart", b"durable"))
    assert broker.stop() == 0
    broker = daemons.broker(ns.addr, *options)  # same name, same store directory
    peer = Listener(S.COMMIT_MESSAGE, S.COMMIT_MESSAGE)
    async with TransactionProducer("pg_trans_restart", ns.addr, transaction_listener=peer):
        assert await wait_until(lambda: len(peer.checked) >= 1, 20), "no check after the restart"
        assert peer.checked[0].properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == result.msg_id
        assert await wait_for_async(lambda: visible(raw, broker.addr, result), 10)
    assert [m.body for m in await visible(raw, broker.addr, result)] == [b"durable"]
