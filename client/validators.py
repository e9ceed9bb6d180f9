"""Validators: what the SDK refuses at the call, before anything is encoded or sent.

Java's client checks topics, groups and messages in ``org.apache.rocketmq.client.Validators``
and user properties in ``Message.putUserProperty`` (4.9.7). The same checks here, with the same
remarks and, where Java gives one, its response code (MESSAGE_ILLEGAL for the body). What Java's
static types enforce (a ``byte[]`` body, ``int`` flag and delay level, ``String`` properties) is
checked too: in Python a wrong type would otherwise reach the connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rocketmq_py.client.errors import MessageValidationError
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.protocol.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from rocketmq_py.remoting.protocol.topic_validator import (
    GROUP_MAX_LENGTH,
    TOPIC_MAX_LENGTH,
    VALID_PATTERN,
    is_not_allowed_send_topic,
    is_topic_or_group_illegal,
)

if TYPE_CHECKING:
    from rocketmq_py.client.message import Message

_MESSAGE_ILLEGAL = int(ResponseCode.MESSAGE_ILLEGAL)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# The broker refuses a properties string over Short.MAX_VALUE bytes (PROPERTIES_SIZE_EXCEEDED).
MAX_PROPERTIES_LENGTH = 32767

# Names the SDK sets itself (MessageConst.STRING_HASH_SET): a user property of the same name
# would be read as the system's.
RESERVED_PROPERTY_NAMES = frozenset({
    MessageConst.TRACE_SWITCH, MessageConst.MSG_REGION, MessageConst.KEYS, MessageConst.TAGS,
    MessageConst.WAIT_STORE_MSG_OK, MessageConst.DELAY_TIME_LEVEL, MessageConst.RETRY_TOPIC,
    MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID, MessageConst.TRANSACTION_PREPARED,
    MessageConst.PRODUCER_GROUP, MessageConst.MIN_OFFSET, MessageConst.MAX_OFFSET, MessageConst.BUYER_ID,
    MessageConst.ORIGIN_MESSAGE_ID, MessageConst.TRANSFER_FLAG, MessageConst.CORRECTION_FLAG,
    MessageConst.MQ2_FLAG, MessageConst.RECONSUME_TIME, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageConst.MAX_RECONSUME_TIMES, MessageConst.CONSUME_START_TIMESTAMP, MessageConst.INSTANCE_ID,
    MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL,
    MessageConst.REPLY_MESSAGE_ARRIVE_TIME, MessageConst.PUSH_REPLY_TIME, MessageConst.CLUSTER,
    MessageConst.MESSAGE_TYPE, "INNER_MULTI_QUEUE_OFFSET"})


def _illegal(remark: str) -> MessageValidationError:
    return MessageValidationError(f"CODE: {_MESSAGE_ILLEGAL}  DESC: {remark}", _MESSAGE_ILLEGAL, remark)


def _refused(remark: str) -> MessageValidationError:
    return MessageValidationError(remark, None, remark)


def check_group(group: Any) -> None:
    if not isinstance(group, str) or not group.strip():
        raise _refused("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise _refused(f"the specified group is longer than group max length {GROUP_MAX_LENGTH}.")
    if is_topic_or_group_illegal(group):
        raise _refused(f"the specified group[{group}] contains illegal characters, allowing only {VALID_PATTERN}")


def check_topic(topic: Any) -> None:
    if not isinstance(topic, str) or not topic.strip():
        raise _refused("The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise _refused(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if is_topic_or_group_illegal(topic):
        raise _refused(f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_PATTERN}")


def body_size(body: Any) -> int:
    """The size in bytes of a bytes-like body; MESSAGE_ILLEGAL for anything else (a ``str``
    must be encoded by its owner, who knows its charset)."""
    if body is None:
        raise _illegal("the message body is null")
    if isinstance(body, bytes | bytearray):
        return len(body)
    if isinstance(body, memoryview):
        if not body.c_contiguous:
            raise _illegal("the message body is a non-contiguous memoryview: pass bytes")
        return body.nbytes
    hint = ": encode it first, e.g. body.encode()" if isinstance(body, str) else ""
    raise _illegal(f"the message body must be bytes, bytearray or memoryview, not {type(body).__name__}{hint}")


def check_int(name: str, value: Any, low: int, high: int) -> None:
    """``value`` is an int (not a bool) in [low, high], the range of its Java field."""
    if value.__class__ is not int or not low <= value <= high:
        raise _illegal(f"the message {name} must be an int in [{low}, {high}], not {value!r}")


def _check_text(what: str, value: Any) -> None:
    if value.__class__ is not str:
        raise _illegal(f"the message {what} must be a str, not {type(value).__name__}")
    if NAME_VALUE_SEPARATOR in value or PROPERTY_SEPARATOR in value:
        # The properties string's own separators: the broker would read a different message.
        raise _illegal(f"the message {what} {value!r} holds a \\x01 or \\x02 character, which separate properties")


def check_user_properties(properties: Mapping[str, Any]) -> int:
    """``Message.putUserProperty``'s checks over the properties a user set; returns their
    length in characters as the properties string holds them. Every send with properties
    pays for this loop, so the common case is a few tests per property, inline."""
    if properties.__class__ is not dict and not isinstance(properties, Mapping):
        raise _illegal(f"the message properties must be a dict of str to str, not {type(properties).__name__}")
    length = 0
    reserved, name_value, separator = RESERVED_PROPERTY_NAMES, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    for name, value in properties.items():
        if name in reserved:
            raise _illegal(f"The Property<{name}> is used by system, input another please")
        if name.__class__ is not str or value.__class__ is not str or not name or not value or name.isspace() \
                or value.isspace():
            raise _illegal("The name or value of property can not be null or blank string!")
        if name_value in name or separator in name or name_value in value or separator in value:
            _check_text("property name", name)
            _check_text("property value", value)
        length += len(name) + len(value) + 2
    return length


def check_send_topic(topic: Any) -> None:
    """A topic a producer may send to: legal, and not one of the broker's own."""
    check_topic(topic)
    if is_not_allowed_send_topic(topic):
        raise _refused(f"Sending message to topic[{topic}] is forbidden.")


def check_message(msg: Message, max_message_size: int, topic_checked: bool = False) -> int:
    """``Validators.checkMessage`` and the typed fields' ranges; returns the body's size.
    ``topic_checked``: the caller already passed this topic through ``check_send_topic``."""
    if msg is None:
        raise _illegal("the message is null")
    if not topic_checked:
        check_send_topic(msg.topic)
    body = msg.body
    size = len(body) if body.__class__ is bytes else body_size(body)
    if size == 0:
        raise _illegal("the message body length is zero")
    if size > max_message_size:
        raise _illegal(f"the message body size over max value, MAX: {max_message_size}")
    flag, level = msg.flag, msg.delay_time_level
    if flag.__class__ is not int or not _INT32_MIN <= flag <= _INT32_MAX:
        check_int("flag", flag, _INT32_MIN, _INT32_MAX)
    if level.__class__ is not int or not 0 <= level <= _INT32_MAX:
        check_int("delay time level", level, 0, _INT32_MAX)
    tags, keys = msg.tags, msg.keys
    if tags is not None and (tags.__class__ is not str or "\x01" in tags or "\x02" in tags):
        _check_text("tags", tags)
    if keys is not None and (keys.__class__ is not str or "\x01" in keys or "\x02" in keys):
        keys = [keys] if keys.__class__ is str else keys
        if not isinstance(keys, list | tuple | set | frozenset):
            raise _illegal(f"the message keys must be a str or a sequence of str, not {type(keys).__name__}")
        for key in keys:
            _check_text("key", key)
    return size


def check_properties_length(properties: str) -> None:
    """The broker's limit on the properties string, checked before a round trip is spent on it."""
    if len(properties) > MAX_PROPERTIES_LENGTH // 4 and len(properties.encode()) > MAX_PROPERTIES_LENGTH:
        raise _illegal(f"the message properties are {len(properties.encode())} bytes, over the limit "
                       f"{MAX_PROPERTIES_LENGTH}")
