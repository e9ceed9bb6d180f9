"""Python SDK: Producer, TransactionProducer, PushConsumer, LitePullConsumer, Admin.

The PySpark connector (source and sink) is ``rocketmq_py.client.spark``, with the ``spark`` extra.
"""

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import (
    ClientStateError,
    MessageValidationError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
)
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.message import Message, MessageExt, SendResult, SendStatus
from rocketmq_py.client.message_selector import MessageSelector
from rocketmq_py.client.producer import Producer, select_by_hash
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from rocketmq_py.client.transaction_producer import (
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
    "SessionCredentials",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
]
