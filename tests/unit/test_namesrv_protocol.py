"""NameServer bodies (docs/protocol.md#nameserver-requests): byte shapes, both brokerAddrs forms, compression."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.json_body import loads
from rocketmq_py.remoting.protocol.namesrv import RegisterBrokerRequestHeader
from rocketmq_py.remoting.protocol.route import (
    BrokerData,
    ClusterInfo,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicList,
    TopicRouteData,
)
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType

# A route in the standard form (docs/protocol.md#json-bodies), byte for byte (fastjson: sorted fields, no spaces).
SPEC_ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",'
              b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
              b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
SPEC_CLUSTER = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
                b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


def _spec_route() -> TopicRouteData:
    return TopicRouteData(
        brokerDatas=[BrokerData(brokerAddrs={0: "10.0.0.1:10911"}, brokerName="broker-a", cluster="DefaultCluster")],
        queueDatas=[QueueData(brokerName="broker-a", perm=6, readQueueNums=4, writeQueueNums=4)])


def test_route_standard_form_is_the_spec_bytes() -> None:
    assert _spec_route().encode_for(standard=True) == SPEC_ROUTE
    assert TopicRouteData.decode(SPEC_ROUTE) == _spec_route()


def test_route_fastjson_form_has_bare_broker_id_keys_only() -> None:
    legacy = _spec_route().encode_for(standard=False)
    assert legacy == SPEC_ROUTE.replace(b'{"0":', b"{0:")
    with pytest.raises(json.JSONDecodeError):
        json.loads(legacy)  # not valid JSON, exactly as Java's default output
    assert TopicRouteData.decode(legacy) == _spec_route()


def test_order_topic_conf_only_when_set() -> None:
    route = _spec_route()
    assert b"orderTopicConf" not in route.encode_for(True)
    route.orderTopicConf = "broker-a:4"
    assert json.loads(route.encode_for(True))["orderTopicConf"] == "broker-a:4"


def test_cluster_info_is_always_the_fastjson_form() -> None:
    info = ClusterInfo(brokerAddrTable={"broker-a": _spec_route().brokerDatas[0]},
                       clusterAddrTable={"DefaultCluster": ["broker-a"]})
    assert info.encode() == SPEC_CLUSTER
    assert ClusterInfo.decode(SPEC_CLUSTER) == info


def test_small_bodies() -> None:
    assert TopicList(topicList=["A", "B"]).encode() == b'{"topicList":["A","B"]}', "null brokerAddr omitted"
    assert TopicList(topicList=[], brokerAddr="h:1").encode() == b'{"brokerAddr":"h:1","topicList":[]}'
    kv = KVTable(table={"TopicA": "broker-a:4;broker-b:4"})
    assert kv.encode() == b'{"table":{"TopicA":"broker-a:4;broker-b:4"}}'
    assert DataVersion(counter=3, timestamp=1700000000000).encode() == b'{"counter":3,"timestamp":1700000000000}'


def test_readers_ignore_unknown_keys_and_accept_the_old_sys_flag_name() -> None:
    qd = QueueData.decode(b'{"brokerName":"b","perm":6,"readQueueNums":1,"topicSynFlag":1,"writeQueueNums":1,"x":2}')
    assert qd.topicSysFlag == 1
    assert b'"topicSysFlag":1' in qd.encode()


def test_bare_key_reader_leaves_strings_alone() -> None:
    text = '{"brokerAddrs":{0:"a,1:b",-1:"{2:\\"c\\"}"},"n":{"k":"0:x"}}'
    assert loads(text) == {"brokerAddrs": {"0": "a,1:b", "-1": '{2:"c"}'}, "n": {"k": "0:x"}}


@given(st.dictionaries(st.integers(0, 2**40), st.from_regex(r"[0-9a-z.:,{}\"]{0,20}", fullmatch=True), max_size=5))
def test_both_forms_round_trip(addrs: dict[int, str]) -> None:
    route = TopicRouteData(brokerDatas=[BrokerData(brokerAddrs=addrs, brokerName="b", cluster="c")])
    for standard in (True, False):
        assert TopicRouteData.decode(route.encode_for(standard)) == route


def _register_body() -> RegisterBrokerBody:
    wrapper = TopicConfigSerializeWrapper(
        dataVersion=DataVersion(counter=3, timestamp=1700000000000),
        topicConfigTable={"TopicTest": TopicConfig(topicName="TopicTest", readQueueNums=4, writeQueueNums=4),
                          "M": TopicConfig(topicName="M", readQueueNums=2, writeQueueNums=1, perm=4,
                                           topicFilterType=TopicFilterType.MULTI_TAG)})
    return RegisterBrokerBody(filterServerList=["10.0.0.1:30000"], topicConfigSerializeWrapper=wrapper)


def test_register_body_spec_example_parses() -> None:
    body = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
            b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,'
            b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}')
    reg = RegisterBrokerBody.decode(body)
    assert reg.encode() == body
    assert reg.topicConfigSerializeWrapper.topicConfigTable["TopicTest"].writeQueueNums == 4


def test_compressed_register_body_matches_the_spec_layout() -> None:
    # Built by hand from docs/protocol.md#nameserver-requests: int32-length-prefixed parts inside one zlib stream.
    def lp(b: bytes) -> bytes:
        return struct.pack(">i", len(b)) + b

    raw = (lp(b'{"counter":3,"timestamp":1700000000000}') + struct.pack(">i", 2)
           + lp(b"TopicTest 4 4 6 SINGLE_TAG") + lp(b"M 2 1 4 MULTI_TAG") + lp(b'["10.0.0.1:30000"]'))
    expected = _register_body()
    assert RegisterBrokerBody.decode_compressed(zlib.compress(raw, 9)) == expected
    assert zlib.decompress(expected.encode_compressed()) == raw


@pytest.mark.parametrize("cut", [1, 5, 30, 45, 60])
def test_truncated_compressed_body_is_a_value_error(cut: int) -> None:
    raw = zlib.decompress(_register_body().encode_compressed())
    with pytest.raises(ValueError):
        RegisterBrokerBody.decode_compressed(zlib.compress(raw[:cut]))


def test_register_header_round_trip() -> None:
    h = RegisterBrokerRequestHeader(brokerName="broker-a", brokerAddr="10.0.0.1:10911", clusterName="C",
                                    haServerAddr="10.0.0.1:10912", brokerId=0, compressed=False, bodyCrc32=7)
    ext = h.to_ext_fields()
    assert ext["brokerId"] == "0" and ext["compressed"] == "false"
    assert RegisterBrokerRequestHeader.from_ext_fields(ext) == h
