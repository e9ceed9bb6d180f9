"""MessageSelector: how a consumer says which messages of a topic it wants (Java's MessageSelector).

``by_tag("A || B")`` filters by tag: the broker by the tag hash in the ConsumeQueue, the client
again by the exact tag. ``by_sql("a > 5 AND region IN ('eu','us')")`` filters by SQL92 over the
message properties, on the broker only, which needs ``enablePropertyFilter=true`` there; the
consumer asks each broker to compile it at start (CHECK_CLIENT_CONFIG), so a bad selector is
refused then with the broker's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq_py.remoting.protocol.heartbeat import SUB_ALL, ExpressionType


@dataclass(frozen=True, slots=True)
class MessageSelector:
    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        if sql is None or not sql.strip():
            # FilterAPI.build: an SQL92 subscription must say something.
            raise ValueError("Expression can't be null! SQL92")
        return cls(ExpressionType.SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None = None) -> MessageSelector:
        """``None``, empty or ``*`` select every message."""
        return cls(ExpressionType.TAG, tag if tag and tag.strip() else SUB_ALL)
