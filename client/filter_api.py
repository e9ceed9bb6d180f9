"""FilterAPI: a subscription's SubscriptionData from its topic and expression."""

from __future__ import annotations

import time

from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.remoting.protocol.heartbeat import SUB_ALL, ExpressionType, SubscriptionData
from rocketmq_py.remoting.protocol.message import java_string_hash


def build_subscription(topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
    """FilterAPI.build: tags split on ``||``, their Java hashes as the code set; SQL92 kept as text
    (the broker compiles it; no tag set, so the client filters nothing itself)."""
    if isinstance(expression, MessageSelector):
        if expression.expression_type == ExpressionType.SQL92:
            return SubscriptionData(topic=topic, subString=expression.expression,
                                    expressionType=ExpressionType.SQL92, subVersion=int(time.time() * 1000))
        if expression.expression_type != ExpressionType.TAG:
            raise ValueError(f"unknown expression type {expression.expression_type!r}")
        expression = expression.expression
    expression = (expression or "").strip()
    sub = SubscriptionData(topic=topic, subString=SUB_ALL if expression in ("", SUB_ALL) else expression,
                           subVersion=int(time.time() * 1000))
    if sub.subString != SUB_ALL:
        tags = [t.strip() for t in expression.split("||") if t.strip()]
        if not tags:
            raise ValueError(f"invalid tag expression: {expression!r}")
        sub.tagsSet = tags
        sub.codeSet = [java_string_hash(t) for t in tags]
    return sub
