"""Refused requests logged at WARN, once per (code, address) per interval, from the processor table."""

from __future__ import annotations

import logging

import pytest

from rocketmq_py.common.refusal_log import RefusalLog
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.processor import ProcessorResult, ProcessorTable
from rocketmq_py.remoting.protocol.heartbeat import HeartbeatData
from tests.unit.recording_connection import RecordingConnection


def _heartbeat(conn: object, request: RemotingCommand) -> ProcessorResult:
    try:
        HeartbeatData.decode(request.body)
    except ValueError as exc:
        return request.response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}")
    return request.response()


def _needs_header(conn: object, request: RemotingCommand) -> ProcessorResult:
    raise ValueError("the custom field <topic> is null")


def _refusal_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("refused request")]


def test_a_refused_body_is_logged_at_warn_with_address_code_and_reason(caplog: pytest.LogCaptureFixture) -> None:
    table = ProcessorTable()
    table.register(34, _heartbeat)  # type: ignore[arg-type]
    conn = RecordingConnection("10.1.2.3:4567")
    caplog.set_level(logging.WARNING, logger="rocketmq.remoting")
    table.dispatch(conn, RemotingCommand.request(34, body=b'{"consumerDataSet":[]}'))  # type: ignore[arg-type]
    (answer,) = conn.written
    assert answer.code == ResponseCode.SYSTEM_ERROR
    (line,) = _refusal_lines(caplog)
    assert line.levelno == logging.WARNING
    text = line.getMessage()
    assert "10.1.2.3:4567" in text and "code 34" in text and "clientID" in text


def test_a_header_decode_failure_and_a_refused_oneway_request_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    table = ProcessorTable()
    table.register(10, _needs_header)  # type: ignore[arg-type]
    table.register(34, _heartbeat)  # type: ignore[arg-type]
    conn = RecordingConnection("10.1.2.3:4567")
    caplog.set_level(logging.WARNING, logger="rocketmq.remoting")
    table.dispatch(conn, RemotingCommand.request(10))  # type: ignore[arg-type]
    table.dispatch(conn, RemotingCommand.request(34, body=b"not json").mark_oneway())  # type: ignore[arg-type]
    assert len(conn.written) == 1  # the oneway request gets no answer, only the line
    lines = [r.getMessage() for r in _refusal_lines(caplog)]
    assert len(lines) == 2
    assert "code 10" in lines[0] and "<topic> is null" in lines[0]
    assert "code 34" in lines[1]
    # a request's own fault is one line, without a traceback
    assert all(r.exc_info is None for r in caplog.records)


def test_repeats_are_rate_limited_per_code_and_address(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    refusals = RefusalLog(logging.getLogger("rocketmq.remoting"), interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="rocketmq.remoting")
    assert refusals.refused("a:1", 34, "bad")
    assert not refusals.refused("a:1", 34, "bad")
    assert not refusals.refused("a:1", 34, "bad")
    assert refusals.refused("a:1", 10, "bad")  # another code
    assert refusals.refused("b:1", 34, "bad")  # another address
    now[0] += 59.9
    assert not refusals.refused("a:1", 34, "bad")
    now[0] += 0.2
    assert refusals.refused("a:1", 34, "bad again")
    lines = [r.getMessage() for r in _refusal_lines(caplog)]
    assert len(lines) == 4
    assert lines[-1].endswith("bad again (3 more refused since the last line)")


def test_the_table_of_keys_stays_bounded() -> None:
    now = [0.0]
    refusals = RefusalLog(logging.getLogger("test.refusals"), interval=60.0, max_keys=8, clock=lambda: now[0])
    for port in range(100):
        assert refusals.refused(f"c:{port}", 34, "bad")
        now[0] += 1
    assert len(refusals._seen) <= 8
    # the newest key is remembered: its repeat is still suppressed
    assert not refusals.refused("c:99", 34, "bad")


def test_a_served_request_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    table = ProcessorTable()
    table.register(34, _heartbeat)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger="rocketmq.remoting")
    table.dispatch(RecordingConnection("a:1"), RemotingCommand.request(34, body=b'{"clientID":"c"}'))  # type: ignore[arg-type]
    assert _refusal_lines(caplog) == []
