"""Hooks the send and pull processors call for every message sent and pulled (Java's broker
``mqtrace`` package: SendMessageHook, ConsumeMessageHook and their contexts).

The broker's metrics attach here (broker/metrics.py), never by replacing a processor's methods.
A processor without hooks checks its empty list once per request and builds no context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeaderV2

log = logging.getLogger("rocketmq.broker")

# SEND_MESSAGE carries the header's field names, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE the
# single letters SendMessageRequestHeaderV2 declares.
_V1_KEYS = ("producerGroup", "topic", "queueId", "properties", "batch")
_V2_KEYS = tuple(SendMessageRequestHeaderV2.wire_key(name) for name in _V1_KEYS)


@dataclass(slots=True)
class SendMessageContext:
    """One send as its hooks see it: what the producer asked (read from the request's fields, so
    a malformed send still has a context) and, after, the broker's answer."""

    request: RemotingCommand
    born_host: str
    producer_group: str
    topic: str
    queue_id: str
    msg_props: str
    body_length: int
    batch: bool
    # after the send: the answer (None only if the processor gave none)
    response: RemotingCommand | None = None

    @classmethod
    def of(cls, born_host: str, request: RemotingCommand) -> SendMessageContext:
        ext = request.ext_fields or {}
        group, topic, queue_id, props, batch = (
            ext.get(key, "") for key in (_V1_KEYS if request.code == RequestCode.SEND_MESSAGE else _V2_KEYS))
        return cls(request, born_host, group, topic, queue_id, props, len(request.body or b""),
                   request.code == RequestCode.SEND_BATCH_MESSAGE or batch == "true")

    @property
    def code(self) -> int | None:
        return None if self.response is None else self.response.code


class SendMessageHook(Protocol):
    def hook_name(self) -> str: ...

    def send_message_before(self, context: SendMessageContext) -> None:
        """Before the send is checked and stored."""

    def send_message_after(self, context: SendMessageContext) -> None:
        """With ``context.response`` set: the answer, once a SYNC_FLUSH or SYNC_MASTER send's
        wait is over."""


@dataclass(slots=True)
class ConsumeMessageContext:
    """One pull as its hooks see it. Java tells its ConsumeMessageHook only of pulls that found
    messages; these hooks hear of every pull, as the metrics keep each group's pulled offsets."""

    request: RemotingCommand
    client_host: str
    consumer_group: str
    topic: str
    queue_id: str
    # time.perf_counter() when the pull began to run
    started: float
    # False: a held pull's re-run, when a message arrived or its wait ended
    allow_suspend: bool
    # after the pull: the answer, None while the broker holds the pull (long polling)
    response: RemotingCommand | None = None

    @classmethod
    def of(cls, client_host: str, request: RemotingCommand, started: float, allow_suspend: bool
           ) -> ConsumeMessageContext:
        ext = request.ext_fields or {}
        return cls(request, client_host, ext.get("consumerGroup", ""), ext.get("topic", ""), ext.get("queueId", ""),
                   started, allow_suspend)


class ConsumeMessageHook(Protocol):
    def hook_name(self) -> str: ...

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        """Before the pull reads the store."""

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        """With ``context.response`` set, or None when the pull is held."""


_Context = TypeVar("_Context", SendMessageContext, ConsumeMessageContext)


def told(call: Callable[[_Context], None], context: _Context) -> None:
    """A hook's ``call`` (one of its before/after methods) with ``context``; a hook's failure is
    logged and never fails the send or the pull (Java ignores what its hooks throw)."""
    try:
        call(context)
    except Exception:
        log.exception("hook %s failed on topic %s", getattr(call, "__qualname__", call), context.topic)
