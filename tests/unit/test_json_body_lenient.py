"""JSON bodies read as leniently as fastjson reads them, whoever wrote them (docs/clients.md)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rocketmq_py.remoting.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    LockBatchRequestBody,
    MessageModel,
    SubscriptionData,
)
from rocketmq_py.remoting.protocol.route import QueueData
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupConfig
from rocketmq_py.remoting.protocol.topic import TopicConfig, TopicFilterType

# Java's declaration order of each enum: an ordinal is a position in these lists.
JAVA_ORDER: dict[type[Enum], list[str]] = {
    ConsumeType: ["CONSUME_ACTIVELY", "CONSUME_PASSIVELY"],
    MessageModel: ["BROADCASTING", "CLUSTERING"],
    ConsumeFromWhere: ["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                       "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                       "CONSUME_FROM_TIMESTAMP"],
    TopicFilterType: ["SINGLE_TAG", "MULTI_TAG"],
}
FIELD_OF: dict[type[Enum], str] = {
    ConsumeType: "consumeType", MessageModel: "messageModel", ConsumeFromWhere: "consumeFromWhere",
}

# What the C++ client 1.2.3 writes (jsoncpp's FastWriter): enums as ordinals, subVersion as a
# string, codeSet as atoi(tag) (so zeros), no expressionType/classFilterMode/unitMode, and a
# trailing newline.
CPP_HEARTBEAT = (
    b'{"clientID":"1234-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,'
    b'"groupName":"cg","messageModel":1,"subscriptionDataSet":[{"codeSet":[0,0],"subString":"A || B",'
    b'"subVersion":"1795592694426","tagsSet":["A","B"],"topic":"T"},{"subString":"*",'
    b'"subVersion":"1795592694426","topic":"%RETRY%cg"}]}],"producerDataSet":[{"groupName":"pg"}]}\n'
)


def test_the_cpp_clients_heartbeat_reads_as_java_reads_it() -> None:
    data = HeartbeatData.decode(CPP_HEARTBEAT)
    (consumer,) = data.consumerDataSet
    assert consumer.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert consumer.consumeType is ConsumeType.CONSUME_PASSIVELY
    assert consumer.messageModel is MessageModel.CLUSTERING
    assert consumer.unitMode is False
    sub, retry = consumer.subscriptionDataSet
    assert (sub.subVersion, sub.codeSet, sub.tagsSet, sub.expressionType) == (1795592694426, [0, 0], ["A", "B"], "TAG")
    assert retry.tagsSet == [] and retry.codeSet == []
    assert [p.groupName for p in data.producerDataSet] == ["pg"]


# What the Go client v2.1.2 writes: codeSet as strings, an unset consumeFromWhere as UNKNOWN.
GO_HEARTBEAT = (
    b'{"clientID":"127.0.0.1@1@0","producerDataSet":[],"consumerDataSet":[{"groupName":"cg",'
    b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"UNKNOWN",'
    b'"subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"A","tagsSet":["A"],'
    b'"codeSet":["65"],"subVersion":1795592694426,"expressionType":"TAG"}],"unitMode":false}]}'
)


def test_the_go_clients_heartbeat_reads_as_java_reads_it() -> None:
    (consumer,) = HeartbeatData.decode(GO_HEARTBEAT).consumerDataSet
    assert consumer.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET  # null to fastjson
    assert consumer.subscriptionDataSet[0].codeSet == [65]


@pytest.mark.parametrize("enum_cls", list(JAVA_ORDER))
def test_enum_members_are_in_javas_order(enum_cls: type[Enum]) -> None:
    assert [m.name for m in enum_cls] == JAVA_ORDER[enum_cls]


@pytest.mark.parametrize("enum_cls", list(FIELD_OF))
def test_an_enum_reads_from_its_name_its_ordinal_or_its_ordinal_as_a_string(enum_cls: type[Enum]) -> None:
    field = FIELD_OF[enum_cls]
    for ordinal, name in enumerate(JAVA_ORDER[enum_cls]):
        for raw in (name, ordinal, str(ordinal), f" {ordinal} ", f"{name}\n"):
            got = ConsumerData.model_validate({"groupName": "g", field: raw})
            assert getattr(got, field) is enum_cls[name], raw


def test_topic_filter_type_by_ordinal() -> None:
    got = TopicConfig.model_validate({"topicName": "t", "topicFilterType": 1})
    assert got.topicFilterType is TopicFilterType.MULTI_TAG


def test_an_unknown_or_empty_enum_name_is_null_to_fastjson_so_the_default_stays() -> None:
    for raw in ("CONSUME_FROM_NOWHERE", "", None):
        got = ConsumerData.model_validate({"groupName": "g", "consumeFromWhere": raw})
        assert got.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET


@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=len(JAVA_ORDER[ConsumeFromWhere]))))
def test_an_ordinal_out_of_range_is_refused(ordinal: int) -> None:
    with pytest.raises(ValidationError, match="ordinal"):
        ConsumerData.model_validate({"groupName": "g", "consumeFromWhere": ordinal})


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.sampled_from(["", " ", "\n", "\t "]))
def test_numbers_read_from_numbers_or_strings_with_whitespace(value: int, space: str) -> None:
    for raw in (value, str(value), f"{space}{value}{space}"):
        assert SubscriptionData.model_validate({"topic": "t", "subVersion": raw}).subVersion == value


def test_booleans_read_from_strings_and_numbers() -> None:
    for raw, want in (("true", True), ("false", False), ("true ", True), (1, True), (0, False), ("1", True)):
        assert ConsumerData.model_validate({"groupName": "g", "unitMode": raw}).unitMode is want


def test_strings_read_from_numbers() -> None:
    got = LockBatchRequestBody.model_validate({"clientId": 12, "consumerGroup": 3.5, "mqSet": []})
    assert (got.clientId, got.consumerGroup) == ("12", "3.5")


def test_whitespace_around_the_body_and_unknown_fields_are_ignored() -> None:
    body = b' \n{"groupName":"g","brokerId":"0","futureField":{"a":[1,2]},"retryMaxTimes":"3"}\r\n\t '
    got = SubscriptionGroupConfig.decode(body)
    assert (got.groupName, got.brokerId, got.retryMaxTimes) == ("g", 0, 3)


def test_missing_or_null_fields_take_javas_defaults() -> None:
    got = SubscriptionGroupConfig.decode(b'{"groupName":"g","retryQueueNums":null,"consumeEnable":null}')
    assert got == SubscriptionGroupConfig(groupName="g")
    assert got.retryQueueNums == 1 and got.consumeEnable is True


def test_a_field_without_a_default_is_still_required() -> None:
    with pytest.raises(ValidationError, match="clientID"):
        HeartbeatData.decode(b'{"consumerDataSet":[]}')
    with pytest.raises(ValidationError, match="groupName"):
        ConsumerData.model_validate({"groupName": None})


def test_aliases_are_read_leniently_too() -> None:
    got = QueueData.model_validate({"brokerName": "b", "perm": "6", "readQueueNums": "4", "writeQueueNums": 4,
                                    "topicSynFlag": " 2 "})
    assert (got.perm, got.readQueueNums, got.topicSysFlag) == (6, 4, 2)


def test_what_we_write_is_unchanged_names_not_ordinals() -> None:
    written = json.loads(HeartbeatData.decode(CPP_HEARTBEAT).encode())
    consumer = written["consumerDataSet"][0]
    assert (consumer["consumeFromWhere"], consumer["consumeType"], consumer["messageModel"]) == (
        "CONSUME_FROM_FIRST_OFFSET", "CONSUME_PASSIVELY", "CLUSTERING")
    assert consumer["subscriptionDataSet"][0]["subVersion"] == 1795592694426


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12)
_heartbeat_keys = ["clientID", "consumerDataSet", "producerDataSet", "groupName", "consumeFromWhere", "consumeType",
                   "messageModel", "subscriptionDataSet", "subVersion", "codeSet", "tagsSet", "topic", "unitMode"]


@given(st.dictionaries(st.sampled_from(_heartbeat_keys), _json, max_size=6))
def test_any_json_body_either_reads_or_is_refused_with_a_validation_error(raw: dict[str, Any]) -> None:
    try:
        HeartbeatData.decode(json.dumps(raw).encode())
    except ValueError:  # pydantic's ValidationError is one
        pass
