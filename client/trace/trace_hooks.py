"""The trace hooks: Java's SendMessageTraceHookImpl, ConsumeMessageTraceHookImpl and
EndTransactionTraceHookImpl, as functions the producer and consumers call only when tracing.

Each builds the context its Java counterpart builds, with the same field sources (so records
from our clients and Java's read alike), and hands it to the dispatcher.
"""

from __future__ import annotations

import time

from rocketmq_py.client.message import SendResult, SendStatus
from rocketmq_py.client.trace.async_trace_dispatcher import AsyncTraceDispatcher
from rocketmq_py.client.trace.trace_constants import DEFAULT_TRACE_REGION_ID
from rocketmq_py.client.trace.trace_context import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
)
from rocketmq_py.remoting.protocol.message import MessageConst, MessageExt


def send_message_after(dispatcher: AsyncTraceDispatcher, group: str, topic: str, props: dict[str, str],
                       body_length: int, broker_addr: str, result: SendResult, started_ms: int) -> None:
    """A Pub record for a send the broker answered. Nothing for the trace topic itself, nor when
    the broker's answer says its traceOn is false."""
    if topic.startswith(dispatcher.trace_topic) or not result.trace_on:
        return
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        msg_type = MessageType.Trans_Msg_Half
    elif MessageConst.DELAY_TIME_LEVEL in props:
        msg_type = MessageType.Delay_Msg
    else:
        msg_type = MessageType.Normal_Msg
    cost = int(time.time() * 1000) - started_ms
    bean = TraceBean(topic=topic, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id,
                     tags=props.get(MessageConst.TAGS), keys=props.get(MessageConst.KEYS), store_host=broker_addr,
                     body_length=body_length, msg_type=msg_type, store_time=started_ms + cost // 2)
    dispatcher.append(TraceContext(TraceType.Pub, [bean], time_stamp=started_ms, region_id=result.region_id,
                                   group_name=group, cost_time=cost,
                                   success=result.send_status is SendStatus.SEND_OK))


def consume_message_before(dispatcher: AsyncTraceDispatcher, group: str, msgs: list[MessageExt]
                           ) -> TraceContext | None:
    """A SubBefore record for the messages a listener is about to get (those whose broker did
    not switch tracing off); the context to pass to ``consume_message_after``."""
    beans = []
    region = ""
    for msg in msgs:
        props = msg.properties
        if props.get(MessageConst.TRACE_SWITCH) == "false":
            continue
        region = props.get(MessageConst.MSG_REGION, "")
        beans.append(TraceBean(topic=msg.topic, msg_id=msg.msg_id, tags=msg.tags, keys=msg.keys,
                               store_time=msg.store_timestamp, body_length=msg.store_size,
                               retry_times=msg.reconsume_times))
    if not beans:
        return None
    ctx = TraceContext(TraceType.SubBefore, beans, region_id=region, group_name=group)
    dispatcher.append(ctx)
    return ctx


def consume_message_after(dispatcher: AsyncTraceDispatcher, before: TraceContext, count: int, success: bool,
                          return_type: ConsumeReturnType) -> None:
    """The SubAfter record: cost per message since SubBefore, success, how the listener ended."""
    cost = (int(time.time() * 1000) - before.time_stamp) // max(count, 1)
    dispatcher.append(TraceContext(TraceType.SubAfter, before.trace_beans, region_id=before.region_id,
                                   group_name=before.group_name, request_id=before.request_id, cost_time=cost,
                                   success=success, context_code=int(return_type)))


def end_transaction(dispatcher: AsyncTraceDispatcher, group: str, topic: str, props: dict[str, str], msg_id: str,
                    transaction_id: str, state: str, broker_addr: str, from_check: bool) -> None:
    """The EndTransaction record of a commit or rollback sent to the broker."""
    if topic.startswith(dispatcher.trace_topic):
        return
    bean = TraceBean(topic=topic, msg_id=msg_id, tags=props.get(MessageConst.TAGS), keys=props.get(MessageConst.KEYS),
                     store_host=broker_addr, msg_type=MessageType.Trans_msg_Commit, transaction_id=transaction_id,
                     transaction_state=state, from_transaction_check=from_check)
    dispatcher.append(TraceContext(TraceType.EndTransaction, [bean],
                                   region_id=props.get(MessageConst.MSG_REGION) or DEFAULT_TRACE_REGION_ID,
                                   group_name=group))
