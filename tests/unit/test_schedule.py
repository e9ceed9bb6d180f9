"""Delay levels, delayOffset.json and parking rules (docs/store-formats.md#delay-levels), without sockets."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rocketmq_py.broker.schedule_message_service import DelayLevelError, ScheduleMessageService
from rocketmq_py.remoting.protocol.message import MessageConst
from rocketmq_py.store.config import SCHEDULE_TOPIC, MessageStoreConfig, parse_delay_levels
from rocketmq_py.store.message_store import DefaultMessageStore
from tests.integration.daemons import ROOT


def test_default_table_has_rocketmqs_eighteen_levels() -> None:
    table = parse_delay_levels(MessageStoreConfig().messageDelayLevel)
    assert len(table) == 18
    assert (table[1], table[3], table[5], table[17], table[18]) == (1000, 10_000, 60_000, 3_600_000, 7_200_000)
    assert parse_delay_levels("2d 500s")[1] == 2 * 86_400_000


@pytest.mark.parametrize("bad", ["", "1x", "s", "1.5s", "10s -1m", "1 s"])
def test_a_bad_level_table_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ValidationError, match="messageDelayLevel"):
        MessageStoreConfig(messageDelayLevel=bad)


def test_broker_with_a_bad_level_table_refuses_to_start(tmp_path: str) -> None:
    r = subprocess.run([sys.executable, "-m", "rocketmq_py.broker.startup", "--store", str(tmp_path), "-o",
                        "messageDelayLevel=1s 2q"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 2 and "messageDelayLevel" in r.stderr and "'2q'" in r.stderr


def _service(tmp_path: str) -> ScheduleMessageService:
    return ScheduleMessageService(DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path),
                                                                          messageDelayLevel="1s 2s 3s")))


def test_levels_are_clamped_and_non_positive_levels_are_no_delay(tmp_path: str) -> None:
    s = _service(tmp_path)
    assert [s.delay_level_of({MessageConst.DELAY_TIME_LEVEL: v}) for v in ("1", "3", "4", "99", "0", "-2")] == [
        1, 3, 3, 3, 0, 0]
    assert s.delay_level_of({}) == 0
    with pytest.raises(DelayLevelError, match="'soon'"):
        s.delay_level_of({MessageConst.DELAY_TIME_LEVEL: "soon"})


@given(st.one_of(st.integers(-(2**70), 2**70).map(str), st.text(alphabet="+- 0123456789_", max_size=24)))
def test_a_delay_level_java_refuses_is_refused_not_clamped(tmp_path_factory: pytest.TempPathFactory,
                                                           raw: str) -> None:
    """Java reads DELAY with Integer.parseInt: 99999999999999999999 throws there, so the send is
    refused rather than parked at the highest level."""
    s = _service(str(tmp_path_factory.mktemp("schedule")))
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if digits.isdigit() and -(2**31) <= int(raw) < 2**31:
        assert s.delay_level_of({MessageConst.DELAY_TIME_LEVEL: raw}) == min(max(int(raw), 0), 3)
    else:
        with pytest.raises(DelayLevelError, match="DELAY"):
            s.delay_level_of({MessageConst.DELAY_TIME_LEVEL: raw})


def test_parking_keeps_the_real_address(tmp_path: str) -> None:
    props = {MessageConst.DELAY_TIME_LEVEL: "7"}
    assert _service(tmp_path).park(props, "Orders", 5, 3) == (SCHEDULE_TOPIC, 2)
    assert props == {MessageConst.DELAY_TIME_LEVEL: "3", MessageConst.REAL_TOPIC: "Orders",
                     MessageConst.REAL_QUEUE_ID: "5"}


def test_delay_offsets_round_trip_and_read_javas_unquoted_keys(tmp_path: str) -> None:
    s = _service(tmp_path)
    s.offset_table = {1: 4, 3: 10}
    s.persist()
    again = _service(tmp_path)
    assert again.load() and again.offset_table == {1: 4, 3: 10}
    with open(again.config_file_path(), "w") as f:
        f.write('{"offsetTable":{1:7,2:0}}')  # as Java's fastjson writes it
    assert again.load() and again.offset_table == {1: 7, 2: 0}
