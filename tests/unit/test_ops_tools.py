"""Pure parts of the operator tools: benchmark statistics, mqadmin's time formats, counting records
in a pull body, latency wrappers (installed only with metrics on), and log rotation."""

from __future__ import annotations

import inspect
import logging
import os
from datetime import datetime

import pytest

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import BrokerController
from rocketmq_py.broker.metrics import BrokerMetrics, BrokerMetricsCollector, PullMetricsHook, count_records
from rocketmq_py.common.logsetup import reset_logging, setup_logging
from rocketmq_py.common.version import version_desc
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.metrics import RpcLatency, TimedProcessor
from rocketmq_py.remoting.processor import ProcessorTable, RequestProcessor
from rocketmq_py.remoting.protocol.message import MessageExt, encode_record
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.tools.bench_stats import LatencyRecorder, percentile
from rocketmq_py.tools.mqadmin.common import CommandError, parse_timestamp


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
    def __init__(self) -> None:
        self.rejecting = False

    async def process_request(self, conn: object, request: RemotingCommand) -> RemotingCommand:  # type: ignore[override]
        return request.response(ResponseCode.SUCCESS)

    def reject_request(self) -> bool:
        return self.rejecting


def _count(latency: RpcLatency, request_code: str, response_code: str) -> int:
    return sum(sum(b.counts) for labels, b in latency.series.items()
               if labels[1] == request_code and labels[2] == response_code)


async def test_timed_processor_observes_latency_and_response() -> None:
    latency = RpcLatency()
    seen: list[int] = []
    inner = _Echo()
    timed = TimedProcessor(inner, latency, lambda req, resp: seen.append(resp.code if resp else -1))
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"body")
    pending = timed.process_request(None, request)  # type: ignore[arg-type]
    assert inspect.isawaitable(pending), "an async processor's result stays awaitable when timed"
    response = await pending
    assert response is not None and response.code == ResponseCode.SUCCESS and seen == [ResponseCode.SUCCESS]
    assert _count(latency, "send_message_v2", "success") == 1
    assert len(latency.series) == 1, "only the codes seen have a series"
    inner.rejecting = True
    assert timed.reject_request()


def test_timed_processor_answers_a_plain_handler_directly() -> None:
    latency = RpcLatency()
    seen: list[int] = []
    table = ProcessorTable()
    table.register(RequestCode.SEND_MESSAGE_V2, lambda conn, req: req.response(ResponseCode.SUCCESS))
    inner = table.processor_for(RequestCode.SEND_MESSAGE_V2)
    assert inner is not None
    timed = TimedProcessor(inner, latency, lambda req, resp: seen.append(resp.code if resp else -1))
    response = timed.process_request(None, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2))  # type: ignore[arg-type]
    assert isinstance(response, RemotingCommand) and response.code == ResponseCode.SUCCESS
    assert seen == [ResponseCode.SUCCESS]
    assert _count(latency, "send_message_v2", "success") == 1


def test_latency_wrappers_only_when_metrics_are_on(tmp_path: str) -> None:
    broker = BrokerController(BrokerConfig(brokerName="b", namesrvAddr=None, brokerIP1="127.0.0.1",
                                           rocketmqHome=str(tmp_path)),
                              NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"),
                              MessageStoreConfig(storePathRootDir=os.path.join(str(tmp_path), "store")))
    codes = (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.GET_BROKER_RUNTIME_INFO)
    before = {c: broker.remoting_server.processors.processor_for(c) for c in codes}
    assert not any(isinstance(p, TimedProcessor) for p in before.values())
    assert broker.pull_processor.hooks == []  # a pull runs no hook
    metrics = BrokerMetrics(broker, -1, "127.0.0.1")
    for server in (broker.remoting_server, broker.fast_server):
        assert isinstance(server.processors.processor_for(RequestCode.SEND_MESSAGE_V2), TimedProcessor)
    assert [type(hook) for hook in broker.pull_processor.hooks] == [PullMetricsHook]
    assert "pull" not in vars(broker.pull_processor), "metrics attach through the hook, not over the method"
    assert metrics.server is None  # port -1: collectors for an embedding registry, no HTTP server


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


def test_timed_processor_keeps_a_processors_runs_and_observes_each_request() -> None:
    latency = RpcLatency()
    seen: list[int] = []

    class _Runs(RequestProcessor):
        def process_request(self, conn: object, request: RemotingCommand) -> RemotingCommand:  # type: ignore[override]
            return request.response(ResponseCode.SUCCESS)

        def process_requests(self, conn: object, requests: list[RemotingCommand]) -> list[RemotingCommand]:
            return [r.response(ResponseCode.SUCCESS) for r in requests[:2]]

    timed = TimedProcessor(_Runs(), latency, lambda req, resp: seen.append(req.opaque))
    requests = [RemotingCommand.request(RequestCode.SEND_MESSAGE_V2) for _ in range(3)]
    results = timed.process_requests(None, requests)  # type: ignore[arg-type]
    assert all(isinstance(r, RemotingCommand) for r in results)
    assert [r.opaque for r in results if isinstance(r, RemotingCommand)] == [r.opaque for r in requests[:2]] == seen
    assert _count(latency, "send_message_v2", "success") == 2
    plain = TimedProcessor(_Echo(), latency)
    assert getattr(plain, "process_requests", None) is None, "no runs for a processor that takes none"


def test_messages_in_by_topic_and_type_and_not_for_retry_topics() -> None:
    collector = BrokerMetricsCollector.__new__(BrokerMetricsCollector)
    BrokerMetricsCollector.__init__(collector, None)  # type: ignore[arg-type]  # hooks only: no broker read

    def sent(code: RequestCode, ext: dict[str, str], body: bytes) -> None:
        request = RemotingCommand.request(code, ext, body)
        collector.on_send(request, request.response(ResponseCode.SUCCESS))

    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": "UNIQ_KEY\x01A\x02TAGS\x01x"}, b"a" * 10)
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": "TRAN_MSG\x01true\x02PGROUP\x01g"}, b"b" * 20)
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": "DELAY\x013"}, b"c")
    sent(RequestCode.SEND_MESSAGE, {"topic": "T", "properties": "__SHARDINGKEY\x01k"}, b"d")
    batch = b"".join(encode_record(MessageExt(topic="T", body=b"x" * n)) for n in (1, 2, 3))
    sent(RequestCode.SEND_BATCH_MESSAGE, {"b": "T", "i": ""}, batch)
    sent(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%g", "i": ""}, b"e")
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T", "i": ""}, b"f")
    collector.on_send(request, request.response(ResponseCode.SYSTEM_ERROR))  # refused: not counted
    assert collector.messages_in == {("T", "normal", "false"): [1 + 3, 10 + len(batch)],
                                     ("T", "transaction", "false"): [1, 20], ("T", "delay", "false"): [1, 1],
                                     ("T", "fifo", "false"): [1, 1]}
    sizes = collector.message_size.series[("T", "normal", "false")]
    assert sum(sizes.counts) == 2 and sizes.total == 10 + len(batch) / 3


def test_version_names_follow_mqversion() -> None:
    assert version_desc(401) == "V4_9_4"
    assert version_desc(0) == "V3_0_0_SNAPSHOT" and version_desc(15) == "V3_0_0_FINAL"
    assert version_desc(479) == "V5_3_3"
