"""Python SDK: Producer, TransactionProducer, PushConsumer, LitePullConsumer, Admin (the Spark connector is coming)."""

from client.admin import Admin
from client.allocate import MessageQueue
from client.errors import ClientStateError, MessageValidationError, MQBrokerError, MQClientError, NoRouteError
from client.lite_pull_consumer import LitePullConsumer
from client.message import Message, MessageExt, SendResult, SendStatus
from client.message_selector import MessageSelector
from client.producer import Producer, select_by_hash
from client.push_consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "Admin",
    "ClientStateError",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageSelector",
    "MessageValidationError",
    "NoRouteError",
    "Producer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
]
