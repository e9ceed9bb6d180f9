"""The connector's options, parsed and checked on the driver before any task runs.

Names follow Spark's Kafka source where the idea is the same (startingOffsets, endingOffsets,
maxOffsetsPerTrigger, failOnDataLoss, minPartitions) and RocketMQ's where it is RocketMQ's
(namesrvAddr, subExpression, consumerGroup). A queue is keyed ``brokerName:queueId`` in JSON
offsets and in Spark's checkpointed offsets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.spark.records import tags_of

EARLIEST = "earliest"
LATEST = "latest"

# A per-queue bound: an offset, or -2 / -1 in a JSON map meaning earliest / latest (Kafka's
# convention, so users can mix fixed offsets with ends in one map).
OffsetSpec = str | dict[str, int]


class OptionError(ValueError):
    """An option that cannot be used; the message names it and says what is accepted."""


# Every option of a read and of a write, as documented; Spark's own per-query keys (a path given to
# load()/save(), a stream writer's checkpointLocation) reach the source too and are not ours to refuse.
SOURCE_OPTIONS = ("namesrvAddr", "topic", "startingOffsets", "endingOffsets", "startingTimestamp",
                  "endingTimestamp", "subExpression", "minPartitions", "maxOffsetsPerTrigger", "failOnDataLoss",
                  "consumerGroup", "pullBatchSize", "pullsInFlight", "rowsPerBatch", "timeout", "accessKey",
                  "secretKey")
SINK_OPTIONS = ("namesrvAddr", "topic", "producerGroup", "batchSize", "timeout", "accessKey", "secretKey")
SPARK_OPTIONS = frozenset({"path", "checkpointlocation"})


def _refuse_unknown(opts: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    """A misspelled option (``startingOffset``) is refused, not ignored: ignoring it would read the
    whole topic, or the wrong part of it, without a word."""
    unknown = sorted(k for k in opts if k not in {n.lower() for n in known} and k not in SPARK_OPTIONS)
    if unknown:
        raise OptionError(f"unknown {what} option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                          f"known: {', '.join(known)}")


def _credentials(opts: Mapping[str, str]) -> SessionCredentials | None:
    """accessKey and secretKey: the ACL account every request of the read or write is signed
    with (docs/acl.md); both or neither."""
    access_key, secret_key = opts.get("accesskey"), opts.get("secretkey")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise OptionError("options accessKey and secretKey go together: set both (an ACL account) or neither")
    return SessionCredentials(access_key, secret_key)


def queue_key(mq: MessageQueue) -> str:
    return f"{mq.broker_name}:{mq.queue_id}"


def parse_queue_key(key: str) -> tuple[str, int]:
    broker, sep, qid = key.rpartition(":")
    if not sep or not broker or not qid.isdigit():
        raise OptionError(f"queue key {key!r} is not brokerName:queueId")
    return broker, int(qid)


def _offsets(name: str, value: str | None, default: str) -> OffsetSpec:
    text = (value or default).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        table = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(f"{name} must be 'earliest', 'latest' or JSON like {{\"broker-a:0\": 42}}; "
                          f"got {text!r}") from None
    if not isinstance(table, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in table.values()):
        raise OptionError(f"{name} JSON must map 'brokerName:queueId' to an offset (-2 earliest, -1 latest)")
    for key, offset in table.items():
        parse_queue_key(key)
        if offset < -2:
            raise OptionError(f"{name}: offset {offset} of {key} is negative")
    return table


def _int(opts: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"{name} must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise OptionError(f"{name} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _float(opts: Mapping[str, str], name: str, default: float) -> float:
    raw = opts.get(name.lower())
    try:
        value = default if raw is None else float(raw)
    except ValueError:
        raise OptionError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"{name} must be > 0, got {value}")
    return value


# Rows per Arrow batch handed to Spark. 4,096 rows of 1 KiB bodies are about 5 MiB of buffers, freed
# again within pyarrow's allocator (mimalloc) before it gives their huge pages back to the system,
# about 10 ms after a free: batches of 8,192 took longer than that to fill, so every batch faulted
# in and zeroed fresh 2 MiB pages (17% of a worker's CPU in perf). 2,048 pays more per batch
# than it saves.
ROWS_PER_BATCH = 4096


@dataclass(frozen=True)
class SourceOptions:
    namesrv_addr: str
    topic: str
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    starting_timestamp: int | None
    ending_timestamp: int | None
    sub_expression: str
    tags: frozenset[str] | None
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    consumer_group: str | None
    pull_batch_size: int
    pulls_in_flight: int
    rows_per_batch: int
    timeout: float
    credentials: SessionCredentials | None = None

    @property
    def pull_group(self) -> str:
        """The group named in PULL_MESSAGE: the mirror group if any, else RocketMQ's tools group.
        Pulls never commit (sysFlag without COMMIT_OFFSET), so naming a group changes nothing."""
        return self.consumer_group or "TOOLS_CONSUMER"


def source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    # Spark hands Python data sources a case-insensitive map; look every name up in lower case.
    opts = {k.lower(): v for k, v in options.items()}
    _refuse_unknown(opts, SOURCE_OPTIONS, "rocketmq source")
    namesrv, topic = opts.get("namesrvaddr"), opts.get("topic")
    if not namesrv:
        raise OptionError("option namesrvAddr is required (host:port[;host:port])")
    if not topic:
        raise OptionError("option topic is required")
    starting_ts = _int(opts, "startingTimestamp", None, 0)
    ending_ts = _int(opts, "endingTimestamp", None, 0)
    if starting_ts is not None and opts.get("startingoffsets"):
        raise OptionError("set startingOffsets or startingTimestamp, not both")
    if ending_ts is not None and opts.get("endingoffsets"):
        raise OptionError("set endingOffsets or endingTimestamp, not both")
    if streaming and (opts.get("endingoffsets") or ending_ts is not None):
        raise OptionError("endingOffsets/endingTimestamp are for batch reads; a stream reads on")
    starting = _offsets("startingOffsets", opts.get("startingoffsets"), LATEST if streaming else EARLIEST)
    ending = _offsets("endingOffsets", opts.get("endingoffsets"), LATEST)
    if ending == EARLIEST:
        raise OptionError("endingOffsets cannot be 'earliest'")
    if starting == LATEST and not streaming:
        raise OptionError("startingOffsets cannot be 'latest' for a batch read (it would read nothing)")
    sub = (opts.get("subexpression") or "*").strip()
    try:
        tags = tags_of(sub)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    return SourceOptions(
        namesrv_addr=namesrv, topic=topic, starting_offsets=starting, ending_offsets=ending,
        starting_timestamp=starting_ts, ending_timestamp=ending_ts, sub_expression=sub, tags=tags,
        min_partitions=_int(opts, "minPartitions", None, 1),
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", None, 1),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        consumer_group=opts.get("consumergroup") or None,
        pull_batch_size=_int(opts, "pullBatchSize", 32, 1) or 32,
        pulls_in_flight=_int(opts, "pullsInFlight", 8, 1) or 8,
        rows_per_batch=_int(opts, "rowsPerBatch", ROWS_PER_BATCH, 1) or ROWS_PER_BATCH,
        timeout=_float(opts, "timeout", 10.0),
        credentials=_credentials(opts),
    )


@dataclass(frozen=True)
class SinkOptions:
    namesrv_addr: str
    topic: str | None
    producer_group: str
    batch_size: int
    timeout: float
    credentials: SessionCredentials | None = None


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = {k.lower(): v for k, v in options.items()}
    _refuse_unknown(opts, SINK_OPTIONS, "rocketmq sink")
    if not opts.get("namesrvaddr"):
        raise OptionError("option namesrvAddr is required (host:port[;host:port])")
    return SinkOptions(
        namesrv_addr=opts["namesrvaddr"], topic=opts.get("topic") or None,
        producer_group=opts.get("producergroup") or "SPARK_PRODUCER_GROUP",
        batch_size=_int(opts, "batchSize", 64, 1) or 64,
        timeout=_float(opts, "timeout", 10.0),
        credentials=_credentials(opts),
    )
