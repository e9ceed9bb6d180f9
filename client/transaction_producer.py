"""TransactionProducer: RocketMQ's TransactionMQProducer on asyncio.

``send_message_in_transaction`` sends a half message (TRAN_MSG=true, PGROUP, sysFlag PREPARED),
which the broker keeps out of consumers' sight; runs the listener's local transaction; and tells
the broker that stored the half message the outcome with a oneway END_TRANSACTION. When the
outcome is unknown (or the END is lost, or this process dies), the broker later asks some live
producer of the same group with CHECK_TRANSACTION_STATE; the client instance hands that to this
class, whose listener's ``check_local_transaction`` answers.

Listener methods may be plain functions or coroutines. Plain ones run on the event loop, so keep
them short (or make them coroutines that await their I/O); ``client.sync.BlockingTransactionProducer``
runs plain ones off the loop.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from dataclasses import dataclass, replace
from typing import Any, Protocol

from rocketmq_py.client.errors import ClientStateError, MQClientError
from rocketmq_py.client.message import Message, SendResult, SendStatus
from rocketmq_py.client.producer import DEFAULT_PRODUCER_GROUP, Producer
from rocketmq_py.client.trace.trace_hooks import end_transaction
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    MessageExt,
    decode_offset_msg_id,
)
from rocketmq_py.remoting.protocol.transaction import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger("rocketmq.client")


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # RocketMQ's spelling


# END_TRANSACTION commitOrRollback values: the sysFlag transaction types.
_COMMIT_OR_ROLLBACK = {LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
                       LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
                       LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE}


class TransactionListener(Protocol):
    """The application's side of a transaction (Java's TransactionListener)."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        """Run the local transaction after the half message is stored; return (or resolve to) a
        LocalTransactionState. None or an exception count as UNKNOW: the broker will check back."""
        ...

    def check_local_transaction(self, msg: MessageExt) -> Any:
        """The broker asks what became of the transaction of ``msg`` (topic and queue are the
        real ones; its UNIQ_KEY property is the transaction id); return a LocalTransactionState."""
        ...


@dataclass
class TransactionSendResult(SendResult):
    transaction_id: str | None = None
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _call(fn: Any, *args: Any) -> LocalTransactionState:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    if result is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(result, LocalTransactionState):
        raise TypeError(f"the transaction listener returned {result!r}, not a LocalTransactionState")
    return result


class TransactionProducer(Producer):
    def __init__(self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str | None = None, *,
                 transaction_listener: TransactionListener | None = None, **kwargs: Any) -> None:
        super().__init__(group, namesrv_addr, **kwargs)
        self.transaction_listener = transaction_listener
        self._checks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        first = self._instance is None
        await super().start()
        if first:
            await self._announce()

    async def _announce(self) -> None:
        """Make this producer known to the brokers now, not at the next 30 s heartbeat, so it can
        answer checks for half messages of its group at once (even ones a dead peer sent). Java
        reaches the same brokers through the route of the auto-create topic it always keeps."""
        instance = self._require_started()
        try:
            await instance.update_topic_route(self.create_topic_key, self.send_msg_timeout)
            await instance.send_heartbeat_to_all_brokers()
        except (MQClientError, RemotingError) as exc:
            log.info("transaction producer %s could not reach the brokers yet: %s", self.group, exc)

    def topics(self) -> set[str]:
        return super().topics() | {self.create_topic_key}

    async def shutdown(self) -> None:
        if self._checks:
            await asyncio.wait(set(self._checks), timeout=self.shutdown_timeout)
        await super().shutdown()

    def _body(self, msg: Message) -> tuple[bytes, int]:
        body, sys_flag = super()._body(msg)
        if msg.properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        return body, sys_flag

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Half message, local transaction, END_TRANSACTION; returns what was sent and decided."""
        listener = self.transaction_listener
        if listener is None:
            raise ClientStateError("TransactionListener is null: pass transaction_listener to TransactionProducer")
        self._require_started()
        self._validate(msg)  # the user's message as given; the half message adds the SDK's names
        props = dict(msg.properties)
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)  # transactional messages cannot be delayed
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        props[MessageConst.PRODUCER_GROUP] = self.group
        half = replace(msg, properties=props, delay_time_level=0)
        result = await self._send(half, None, None, None, None, False)
        state = LocalTransactionState.UNKNOW
        local_error: BaseException | None = None
        transaction_id: str | None = None
        if result.send_status is SendStatus.SEND_OK:
            transaction_id = result.msg_id
            try:
                state = await _call(listener.execute_local_transaction, half, arg)
            except Exception as exc:
                log.warning("executeLocalTransactionBranch exception, msgId %s: %s", result.msg_id, exc)
                local_error, state = exc, LocalTransactionState.UNKNOW
            if state is not LocalTransactionState.COMMIT_MESSAGE:
                log.info("executeLocalTransactionBranch return %s, msgId %s", state.value, result.msg_id)
        else:
            # Stored but not safely (flush or slave timeout): roll back, as Java does.
            state = LocalTransactionState.ROLLBACK_MESSAGE
        if self._trace is not None:
            self._trace_end(half.topic, half.to_properties(), result.msg_id, result.msg_id, state,
                            result.message_queue.broker_name, False)
        try:
            await self._end_transaction(result, state, local_error)
        except (MQClientError, RemotingError, ValueError) as exc:
            log.warning("local transaction %s executed, but end the transaction at the broker failed: %s",
                        state.value, exc)
        return TransactionSendResult(
            send_status=result.send_status, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id,
            message_queue=result.message_queue, queue_offset=result.queue_offset, region_id=result.region_id,
            trace_on=result.trace_on, transaction_id=transaction_id, local_transaction_state=state)

    async def _end_transaction(self, result: SendResult, state: LocalTransactionState,
                               local_error: BaseException | None) -> None:
        instance = self._require_started()
        _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id)
        addr = await instance.master_addr(result.message_queue.topic, result.message_queue.broker_name)
        header = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=result.queue_offset, commitLogOffset=commit_log_offset,
            commitOrRollback=_COMMIT_OR_ROLLBACK[state], msgId=result.msg_id, transactionId=result.msg_id,
            bname=result.message_queue.broker_name)
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header)
        if local_error is not None:
            request.remark = f"executeLocalTransactionBranch exception: {local_error}"
        await instance.remoting.invoke_oneway(addr, request)

    def _trace_end(self, topic: str, props: dict[str, str], msg_id: str, transaction_id: str,
                   state: LocalTransactionState, broker_name: str, from_check: bool) -> None:
        """The EndTransaction record (Java's doExecuteEndTransactionHook), before the END is sent."""
        assert self._trace is not None
        instance = self._require_started()
        end_transaction(self._trace, self.group, topic, props, msg_id, transaction_id, state.value,
                        instance.find_broker_address_in_publish(broker_name) or "", from_check)

    # -- check-back -------------------------------------------------------------------------

    def check_transaction_state(self, broker_addr: str, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        """The client instance got CHECK_TRANSACTION_STATE for this group: ask the listener in
        the background and answer the broker that asked."""
        task = asyncio.get_running_loop().create_task(self._answer_check(broker_addr, msg, header))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, broker_addr: str, msg: MessageExt,
                            header: CheckTransactionStateRequestHeader) -> None:
        listener = self.transaction_listener
        if listener is None or self._instance is None:
            log.warning("check transaction state of %s for group %s, but no listener or not started", header.msgId,
                        self.group)
            return
        state = LocalTransactionState.UNKNOW
        remark = None
        try:
            state = await _call(listener.check_local_transaction, msg)
        except Exception as exc:
            log.error("Broker call checkTransactionState, but checkLocalTransactionState exception: %s", exc)
            remark = f"checkLocalTransactionState Exception: {exc}"
        uniq = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        end = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=header.tranStateTableOffset,
            commitLogOffset=header.commitLogOffset, commitOrRollback=_COMMIT_OR_ROLLBACK[state], msgId=uniq,
            fromTransactionCheck=True, transactionId=header.transactionId, bname=header.bname)
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, end)
        request.remark = remark
        if self._trace is not None:
            end_transaction(self._trace, self.group, msg.topic, msg.properties, uniq, header.transactionId or uniq,
                            state.value, broker_addr, True)
        try:
            await self._instance.remoting.invoke_oneway(broker_addr, request)
        except RemotingError as exc:
            log.warning("endTransactionOneway to %s for %s failed: %s", broker_addr, uniq, exc)
