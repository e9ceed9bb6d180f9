"""Pure parts of the operator tools: benchmark statistics, mqadmin's time formats, counting records
in a pull body, metrics hooks (registered only with metrics on), and log rotation."""

from __future__ import annotations

import logging
import os
from datetime import datetime

import pytest

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import BrokerController
from rocketmq_py.broker.metrics import (
    BrokerMetrics,
    BrokerMetricsCollector,
    ConsumeMetricsHook,
    SendMetricsHook,
    count_records,
)
from rocketmq_py.broker.mqtrace import SendMessageContext
from rocketmq_py.common.logsetup import reset_logging, setup_logging
from rocketmq_py.common.version import version_desc
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.metrics import RpcLatency, RpcLatencyHook
from rocketmq_py.remoting.processor import ProcessorTable, RequestProcessor
from rocketmq_py.remoting.protocol.message import MessageExt, encode_record
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.tools.bench_stats import LatencyRecorder, percentile
from rocketmq_py.tools.mqadmin.common import CommandError, parse_timestamp
from tests.unit.recording_connection import RecordingConnection


def test_percentile_is_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 1001)]
    assert percentile(samples, 0.5) == 500
    assert percentile(samples, 0.99) == 990
    assert percentile(samples, 0.999) == 999
    assert percentile([7.0], 0.999) == 7
    assert percentile([], 0.5) == 0


def test_latency_recorder_windows_and_summary() -> None:
    r = LatencyRecorder()
    r.record(2.0)
    r.record(4.0, messages=3)  # a batch of three messages answered in 4 ms
    r.record_failure(2)
    w = r.roll()
    assert (w.count, w.failed, w.max_ms) == (4, 2, 4.0)
    assert w.avg_ms == pytest.approx((2 + 3 * 4) / 4)
    assert r.roll().count == 0  # the next window starts empty
    s = r.summary(messages=4, elapsed=2.0)
    assert s["tps"] == 2.0 and s["failed"] == 2 and s["maxRtMs"] == 4.0 and s["p50RtMs"] == 2.0


def test_parse_timestamp_formats() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    expected = int(datetime(2024, 5, 6, 7, 8, 9, 123000).timestamp() * 1000)
    assert parse_timestamp("2024-05-06#07:08:09:123") == expected
    assert abs(parse_timestamp("now") - int(datetime.now().timestamp() * 1000)) < 60_000
    with pytest.raises(CommandError, match="yesterday"):
        parse_timestamp("yesterday")


def test_count_records_in_a_pull_body() -> None:
    body = b"".join(encode_record(MessageExt(topic="T", body=b"x" * n, properties={"KEYS": "k"})) for n in (1, 50, 0))
    assert count_records(body) == 3
    assert count_records(b"") == 0


class _Echo(RequestProcessor):
    async def process_request(self, conn: object, request: RemotingCommand) -> RemotingCommand:  # type: ignore[override]
        return request.response(ResponseCode.SUCCESS)


class _Runs(RequestProcessor):
    def process_request(self, conn: object, request: RemotingCommand) -> RemotingCommand:  # type: ignore[override]
        return request.response(ResponseCode.SUCCESS)

    def process_requests(self, conn: object, requests: list[RemotingCommand]) -> list[RemotingCommand]:
        return [r.response(ResponseCode.SUCCESS) for r in requests[:2]]


def _count(latency: RpcLatency, request_code: str, response_code: str) -> int:
    return sum(sum(b.counts) for labels, b in latency.series.items()
               if labels[1] == request_code and labels[2] == response_code)


async def test_rpc_latency_hook_times_awaited_plain_and_run_answers_and_forgets_each() -> None:
    latency = RpcLatency()
    hook = RpcLatencyHook(latency)
    table = ProcessorTable()
    table.register(RequestCode.SEND_MESSAGE_V2, _Echo())
    table.register(RequestCode.HEART_BEAT, lambda conn, req: req.response(ResponseCode.SYSTEM_ERROR, "no"))
    table.register(RequestCode.PULL_MESSAGE, _Runs())
    table.register_rpc_hook(hook)
    conn = RecordingConnection()
    table.dispatch(conn, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"body"))  # type: ignore[arg-type]
    table.dispatch(conn, RemotingCommand.request(RequestCode.HEART_BEAT))  # type: ignore[arg-type]
    table.dispatch_all(conn, [RemotingCommand.request(RequestCode.PULL_MESSAGE)  # type: ignore[arg-type]
                              for _ in range(3)])
    await table.drain(5)
    assert len(conn.written) == 5
    assert _count(latency, "send_message_v2", "success") == 1
    assert _count(latency, "heart_beat", "system_error") == 1
    assert _count(latency, "pull_message", "success") == 3  # two of a run, the third singly
    assert len(latency.series) == 3, "only the codes seen have a series"
    assert hook._started == {}, "every request's start is dropped with its answer"


def test_metrics_attach_through_hooks_only_when_metrics_are_on(tmp_path: str) -> None:
    broker = BrokerController(BrokerConfig(brokerName="b", namesrvAddr=None, brokerIP1="127.0.0.1",
                                           rocketmqHome=str(tmp_path)),
                              NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"),
                              MessageStoreConfig(storePathRootDir=os.path.join(str(tmp_path), "store")))
    servers = (broker.remoting_server, broker.fast_server)
    codes = (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.GET_BROKER_RUNTIME_INFO)
    before = [{c: server.processors.processor_for(c) for c in codes} for server in servers]
    # A broker without metrics runs no hook: every list is empty.
    assert all(server.processors.rpc_hooks == [] for server in servers)
    assert broker.send_processor.send_message_hooks == [] and broker.pull_processor.consume_message_hooks == []
    metrics = BrokerMetrics(broker, -1, "127.0.0.1")
    assert [[type(h) for h in server.processors.rpc_hooks] for server in servers] == [[RpcLatencyHook]] * 2
    assert [type(h) for h in broker.send_processor.send_message_hooks] == [SendMetricsHook]
    assert [type(h) for h in broker.pull_processor.consume_message_hooks] == [ConsumeMetricsHook]
    # The rows keep their processors, and no method is replaced on an instance.
    assert [{c: server.processors.processor_for(c) for c in codes} for server in servers] == before
    assert not {"pull", "process_request", "process_requests"} & (vars(broker.pull_processor).keys()
                                                                    | vars(broker.send_processor).keys())
    assert metrics.server is None  # port -1: collectors for an embedding registry, no HTTP server


def test_send_message_context_reads_either_header_and_marks_batches() -> None:
    v2 = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T", "e": "3", "i": "TAGS\x01x"},
                                 b"abc")
    ctx = SendMessageContext.of("127.0.0.1:9", v2)
    assert (ctx.producer_group, ctx.topic, ctx.queue_id, ctx.msg_props, ctx.body_length, ctx.batch) == \
        ("PG", "T", "3", "TAGS\x01x", 3, False)
    v1 = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"producerGroup": "PG", "topic": "T", "batch": "true"})
    ctx = SendMessageContext.of("127.0.0.1:9", v1)
    assert (ctx.topic, ctx.body_length, ctx.batch, ctx.code) == ("T", 0, True, None)
    assert SendMessageContext.of("x", RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, None)).batch


def test_log_file_rotates(tmp_path: str) -> None:
    log_dir = os.path.join(str(tmp_path), "logs")
    level = logging.getLogger().level
    try:
        path = setup_logging("unit", "INFO", log_dir, max_bytes=400, backup_count=2)
        assert path == os.path.join(log_dir, "unit.log")
        log = logging.getLogger("rocketmq.unit")
        for i in range(60):
            log.info("line %d with some padding to fill the file", i)
        files = sorted(os.listdir(log_dir))
        assert files == ["unit.log", "unit.log.1", "unit.log.2"]
        with open(path) as f:
            assert "line 59" in f.read()
        with pytest.raises(ValueError, match="LOUD"):
            setup_logging("unit", "LOUD", log_dir)
    finally:
        reset_logging()
        logging.getLogger().setLevel(level)


def test_messages_in_by_topic_and_type_and_not_for_retry_topics() -> None:
    collector = BrokerMetricsCollector.__new__(BrokerMetricsCollector)
    BrokerMetricsCollector.__init__(collector, None)  # type: ignore[arg-type]  # hooks only: no broker read

    def sent(code: RequestCode, ext: dict[str, str], body: bytes, answer: ResponseCode = ResponseCode.SUCCESS
             ) -> None:
        request = RemotingCommand.request(code, ext, body)
        context = SendMessageContext.of("127.0.0.1:9", request)
        context.response = request.response(answer)
        collector.on_send(context)

    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": "UNIQ_KEY\x01A\x02TAGS\x01x"}, b"a" * 10)
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": "TRAN_MSG\x01true\x02PGROUP\x01g"}, b"b" * 20)
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": "DELAY\x013"}, b"c")
    sent(RequestCode.SEND_MESSAGE, {"topic": "T", "properties": "__SHARDINGKEY\x01k"}, b"d")
    batch = b"".join(encode_record(MessageExt(topic="T", body=b"x" * n)) for n in (1, 2, 3))
    sent(RequestCode.SEND_BATCH_MESSAGE, {"b": "T", "i": ""}, batch)
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%g", "i": ""}, b"e")
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": ""}, b"f", ResponseCode.SYSTEM_ERROR)  # refused: not counted
    assert collector.messages_in == {("T", "normal", "false"): [1 + 3, 10 + len(batch)],
                                     ("T", "transaction", "false"): [1, 20], ("T", "delay", "false"): [1, 1],
                                     ("T", "fifo", "false"): [1, 1]}
    sizes = collector.message_size.series[("T", "normal", "false")]
    assert sum(sizes.counts) == 2 and sizes.total == 10 + len(batch) / 3


def test_version_names_follow_mqversion() -> None:
    assert version_desc(401) == "V4_9_4"
    assert version_desc(0) == "V3_0_0_SNAPSHOT" and version_desc(15) == "V3_0_0_FINAL"
    assert version_desc(479) == "V5_3_3"
