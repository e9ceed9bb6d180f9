"""PULL_MESSAGE with long polling (Java's PullMessageProcessor).

A pull that finds nothing, on its first attempt and with the SUSPEND flag, is parked in the
PullRequestHoldService and answered when a matching message arrives or its suspend time ends.
The answer body is the stored records themselves, byte for byte.

Filtering: a TAG subscription is matched by the tag hash in the ConsumeQueue (the client then
checks the exact tag); an SQL92 one (broker ``enablePropertyFilter=true``) is matched on each
candidate record's properties, and only for such groups are properties read at all. A pull whose
scanned messages all fail the filter answers NO_MATCHED_MESSAGE (PULL_RETRY_IMMEDIATELY) with the
next offset past them, as Java does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketmq_py.broker.filter import FilterError, Sql92Expression
from rocketmq_py.broker.filter.expression_filter import compile_cached, filter_records
from rocketmq_py.broker.mqtrace import ConsumeMessageContext, ConsumeMessageHook, told
from rocketmq_py.broker.pull_hold import PullRequest
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.processor import RequestProcessor
from rocketmq_py.remoting.protocol.broker import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from rocketmq_py.remoting.protocol.heartbeat import SUB_ALL, ExpressionType, MessageModel
from rocketmq_py.remoting.protocol.message import string_to_properties, tags_string_to_tags_code
from rocketmq_py.remoting.protocol.topic import PermName
from rocketmq_py.store.message_store import MATCH_ALL, GetMessageStatus, MessageFilter

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

MASTER_ID = 0


def parse_tag_codes(expression: str | None) -> set[int] | None:
    """Tag codes of a TAG expression (``"A || B"``); None for ``*`` (match everything)."""
    if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
        return None
    tags = [t.strip() for t in expression.split("||") if t.strip()]
    return {tags_string_to_tags_code(t) for t in tags} or None


def _code_for(status: GetMessageStatus, offset: int) -> int:
    if status == GetMessageStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.NO_MATCHED_MESSAGE):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    if status in (GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL


def _properties_matcher(sql: Sql92Expression) -> Callable[[str], bool]:
    """A held SQL92 pull's test of an arriving message (its stored properties string)."""
    def matches(properties: str) -> bool:
        return sql.matches(string_to_properties(properties))
    return matches


def _compile_sql92(request: RemotingCommand, expression_type: str, subscription: str | None,
                   enabled: bool, from_request: bool) -> Sql92Expression | RemotingCommand:
    """The pull's compiled selector, or the refusal PullMessageProcessor answers with.

    One difference from Java 4.9: there a selector in the pull header that does not compile
    leaves the filter without an expression, and every message passes; here the pull is refused
    with SUBSCRIPTION_PARSE_FAILED, the code Java uses for a header it cannot parse.
    """
    if expression_type != ExpressionType.SQL92:
        return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                f"parse the consumer's subscription failed: unknown expression type {expression_type}")
    if not enabled:
        return request.response(ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {expression_type}")
    try:
        return compile_cached(subscription)
    except FilterError as exc:
        if from_request:
            return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    f"parse the consumer's subscription failed: {exc}")
        # A heartbeat-registered selector that never compiled has no filter data in Java.
        return request.response(ResponseCode.FILTER_DATA_NOT_EXIST,
                                f"The broker's consumer filter data is not exist!Your expression may be wrong! {exc}")


class PullMessageProcessor(RequestProcessor):
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Java's PullMessageProcessor.consumeMessageHookList: told of every pull (metrics)
        self.consume_message_hooks: list[ConsumeMessageHook] = []

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        self.consume_message_hooks.append(hook)

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        return self.pull(conn, request, allow_suspend=True)

    def execute_held(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        """Re-run a held pull without suspending again, and answer it on its connection."""
        response = self.pull(conn, request, allow_suspend=False)
        if response is not None and conn.is_open:
            response.opaque = request.opaque
            response.flag |= RPC_TYPE_RESPONSE
            response.serialize_type = request.serialize_type
            conn.write_command(response)

    def pull(self, conn: RemotingConnection, request: RemotingCommand, allow_suspend: bool) -> RemotingCommand | None:
        """A pull's answer, or None when it is held; the consume hooks told before and after.
        Held pulls are answered through here too (execute_held), not through the processor
        table, so the hooks see every message a consumer gets."""
        hooks = self.consume_message_hooks
        if not hooks:
            return self._pull(conn, request, allow_suspend)
        context = ConsumeMessageContext.of(conn.remote_addr, request, time.perf_counter(), allow_suspend)
        for hook in hooks:
            told(hook.consume_message_before, context)
        context.response = response = self._pull(conn, request, allow_suspend)
        for hook in hooks:
            told(hook.consume_message_after, context)
        return response

    def _pull(self, conn: RemotingConnection, request: RemotingCommand, allow_suspend: bool) -> RemotingCommand | None:
        broker = self.broker
        cfg = broker.broker_config
        h = request.decode_header(PullMessageRequestHeader)
        if not PermName.is_readable(cfg.brokerPermission):
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{cfg.brokerIP1}] pulling message is forbidden")
        group_config = broker.subscription_group_manager.find_subscription_group_config(h.consumerGroup)
        if group_config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group [{h.consumerGroup}] does not exist, apply first please "
                                    "(autoCreateSubscriptionGroup is off)")
        if not group_config.consumeEnable:
            return request.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumerGroup}")
        topic_config = broker.topic_config_manager.select_topic_config(h.topic)
        if topic_config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{h.topic}] not exist, apply first please!")
        if not PermName.is_readable(topic_config.perm):
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if h.queueId < 0 or h.queueId >= topic_config.readQueueNums:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                                    f"topicConfig.readQueueNums:[{topic_config.readQueueNums}] consumer:"
                                    f"[{conn.remote_addr}]")
        if h.sysFlag & FLAG_SUBSCRIPTION:
            expression_type = h.expressionType or ExpressionType.TAG
            subscription = h.subscription
        else:
            group_info = broker.consumer_manager.get_consumer_group_info(h.consumerGroup)
            if group_info is None:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
            if not group_config.consumeBroadcastEnable and group_info.message_model == MessageModel.BROADCASTING:
                return request.response(ResponseCode.NO_PERMISSION,
                                        f"the consumer group[{h.consumerGroup}] can not consume by broadcast way")
            sub = group_info.subscription_table.get(h.topic)
            if sub is None:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
            if sub.subVersion < h.subVersion:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            expression_type, subscription = sub.expressionType, sub.subString
        sql: Sql92Expression | None = None
        if expression_type != ExpressionType.TAG:
            refused = _compile_sql92(request, expression_type, subscription, cfg.enablePropertyFilter,
                                     bool(h.sysFlag & FLAG_SUBSCRIPTION))
            if isinstance(refused, RemotingCommand):
                return refused
            sql = refused
            # The consume queue holds only tag hashes: every unit is a candidate, the records'
            # properties decide (ExpressionMessageFilter without a bloom filter).
            message_filter = MATCH_ALL
        else:
            message_filter = MessageFilter(parse_tag_codes(subscription))
        result = broker.message_store.get_message(h.consumerGroup, h.topic, h.queueId, h.queueOffset,
                                                  h.maxMsgNums, message_filter)
        if sql is not None and result.status == GetMessageStatus.FOUND:
            result.buffers = filter_records(result.buffers, sql)
            if not result.buffers:
                # Java's NO_MATCHED_MESSAGE: PULL_RETRY_IMMEDIATELY, the offset moved past them.
                result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        code = _code_for(result.status, h.queueOffset)
        if result.status != GetMessageStatus.FOUND:
            broker.stats.record_miss()
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and h.sysFlag & FLAG_SUSPEND:
            timeout = h.suspendTimeoutMillis if cfg.longPollingEnable else cfg.shortPollingTimeMills
            broker.pull_hold.suspend_pull_request(PullRequest(
                request, conn, h.topic, h.queueId, h.queueOffset, timeout / 1000,
                matches=message_filter.is_matched_by_consume_queue,
                matches_properties=None if sql is None else _properties_matcher(sql)))
            response = None
        else:
            # Java's rule: with slaveReadEnable, a consumer reading what is no longer in memory is
            # sent to whichBrokerWhenConsumeSlowly, any other to the group's brokerId; without it,
            # to the master (a slave too serves what it is asked, and points back to the master).
            suggest = MASTER_ID
            if cfg.slaveReadEnable:
                suggest = group_config.whichBrokerWhenConsumeSlowly if result.suggest_pulling_from_slave \
                    else group_config.brokerId
            header = PullMessageResponseHeader(suggestWhichBrokerId=suggest, nextBeginOffset=result.next_begin_offset,
                                               minOffset=result.min_offset, maxOffset=result.max_offset)
            body = b"".join(result.buffers) if code == ResponseCode.SUCCESS else None
            if body:
                broker.stats.record_get(result.message_count, len(body), h.consumerGroup, h.topic)
            response = request.response(code, None if code == ResponseCode.SUCCESS else result.status.value,
                                        header=header, body=body)
        if allow_suspend and h.sysFlag & FLAG_COMMIT_OFFSET and broker.broker_config.brokerId == MASTER_ID:
            broker.consumer_offset_manager.commit_offset(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return response
