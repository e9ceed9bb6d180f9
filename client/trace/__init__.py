"""Message trace in RocketMQ 4.9's format (docs/message_trace.md): hooks that record sends,
consumptions and transaction ends, a dispatcher that batches them into the trace topic, and
the codec both our tools and Java's read."""

from rocketmq_py.client.trace.async_trace_dispatcher import AsyncTraceDispatcher
from rocketmq_py.client.trace.trace_constants import RMQ_SYS_TRACE_TOPIC
from rocketmq_py.client.trace.trace_context import ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from rocketmq_py.client.trace.trace_data_encoder import decode, encode
from rocketmq_py.client.trace.trace_view import TraceView, decode_from_trace_trans_data, query_trace_by_msg_id

__all__ = ["RMQ_SYS_TRACE_TOPIC", "AsyncTraceDispatcher", "ConsumeReturnType", "MessageType", "TraceBean",
           "TraceContext", "TraceType", "TraceView", "decode", "decode_from_trace_trans_data", "encode",
           "query_trace_by_msg_id"]
