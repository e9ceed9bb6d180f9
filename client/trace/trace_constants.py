"""TraceConstants of RocketMQ 4.9's client: the record separators and the trace producer's names.

Java's clients and ours write trace data into the same topic in the same text format
(docs/message_trace.md), so both must agree on these to read each other's records.
"""

from __future__ import annotations

from rocketmq_py.remoting.protocol.topic_validator import RMQ_SYS_TRACE_TOPIC

# Between the fields of one record, and after each record (several records make one message).
CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
# The trace producer's group is GROUP_NAME_PREFIX-<host group>-<PRODUCER|CONSUMER>-<n>, its
# client instance TRACE_INSTANCE_NAME_<namesrv>: a client of its own, apart from the host's.
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
# MixAll.DEFAULT_TRACE_REGION_ID: the region a record carries when the broker named none.
DEFAULT_TRACE_REGION_ID = "DefaultRegion"

__all__ = ["CONTENT_SPLITOR", "DEFAULT_TRACE_REGION_ID", "FIELD_SPLITOR", "GROUP_NAME_PREFIX",
           "RMQ_SYS_TRACE_TOPIC", "TRACE_INSTANCE_NAME"]
