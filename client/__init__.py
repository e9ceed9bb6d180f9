"""Python SDK: producers (consumers, admin and the Spark connector are coming)."""

from client.allocate import MessageQueue
from client.errors import ClientStateError, MessageValidationError, MQBrokerError, MQClientError, NoRouteError
from client.message import Message, MessageExt, SendResult, SendStatus
from client.producer import Producer, select_by_hash

__all__ = [
    "ClientStateError",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageValidationError",
    "NoRouteError",
    "Producer",
    "SendResult",
    "SendStatus",
    "select_by_hash",
]
