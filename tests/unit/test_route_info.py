"""RouteInfoManager as plain data: registration, merging, expiry, permissions, deletion."""

from __future__ import annotations

import json

from rocketmq_py.namesrv.route_info import RouteInfoManager
from rocketmq_py.remoting.protocol.json_body import loads
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper

A1, A2, A1S = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def _wrapper(*topics: tuple[str, int], counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        dataVersion=DataVersion(counter=counter, timestamp=1700000000000),
        topicConfigTable={t: TopicConfig(topicName=t, readQueueNums=q, writeQueueNums=q) for t, q in topics})


def _two_masters_and_a_slave() -> RouteInfoManager:
    r = RouteInfoManager()
    r.register_broker("C", A1, "broker-a", 0, "10.0.0.1:10912", _wrapper(("T", 4), ("OnlyA", 2)), [], now=0)
    r.register_broker("C", A2, "broker-b", 0, "10.0.0.2:10912", _wrapper(("T", 8)), [], now=0)
    result = r.register_broker("C", A1S, "broker-a", 1, "10.0.0.3:10912", _wrapper(("T", 4)), [], now=0)
    assert (result.master_addr, result.ha_server_addr) == (A1, "10.0.0.1:10912")
    return r


def test_routes_merge_across_brokers_and_slaves() -> None:
    r = _two_masters_and_a_slave()
    route = r.pickup_topic_route_data("T")
    assert route is not None
    assert sorted((q.brokerName, q.writeQueueNums) for q in route.queueDatas) == [("broker-a", 4), ("broker-b", 8)]
    addrs = {b.brokerName: b.brokerAddrs for b in route.brokerDatas}
    assert addrs == {"broker-a": {0: A1, 1: A1S}, "broker-b": {0: A2}}
    assert r.get_all_cluster_info().clusterAddrTable == {"C": ["broker-a", "broker-b"]}
    assert r.get_topics_by_cluster("C") == ["T", "OnlyA"]
    assert r.pickup_topic_route_data("Nope") is None


def test_route_body_forms_and_cache_invalidation() -> None:
    r = _two_masters_and_a_slave()
    standard = r.topic_route_body("T", True, None)
    legacy = r.topic_route_body("T", False, None)
    assert standard is not None and legacy is not None
    assert b'"brokerAddrs":{"0":' in standard and b'"brokerAddrs":{0:' in legacy
    json.loads(standard)  # the standard form is valid JSON
    assert loads(legacy) == loads(standard)
    assert r.topic_route_body("T", True, None) is standard, "unchanged routes come from the cache"
    # Same data version again: nothing changes, the cache stays.
    r.register_broker("C", A2, "broker-b", 0, "", _wrapper(("T", 8)), [], now=1)
    assert r.topic_route_body("T", True, None) is standard
    # New data version with a new queue count: the cached body is replaced.
    r.register_broker("C", A2, "broker-b", 0, "", _wrapper(("T", 16), counter=2), [], now=2)
    fresh = r.topic_route_body("T", True, None)
    assert fresh is not standard and b'"writeQueueNums":16' in fresh  # type: ignore[operator]


def test_unregister_removes_only_what_that_broker_provided() -> None:
    r = _two_masters_and_a_slave()
    r.unregister_broker("C", A1S, "broker-a", 1)
    assert r.broker_addr_table["broker-a"].brokerAddrs == {0: A1}
    r.unregister_broker("C", A1, "broker-a", 0)
    assert "broker-a" not in r.broker_addr_table
    assert r.pickup_topic_route_data("OnlyA") is None and "OnlyA" not in r.topic_queue_table
    route = r.pickup_topic_route_data("T")
    assert route is not None and [q.brokerName for q in route.queueDatas] == ["broker-b"]
    assert r.get_all_cluster_info().clusterAddrTable == {"C": ["broker-b"]}


def test_expiry_and_channel_close() -> None:
    r = _two_masters_and_a_slave()
    chan = object()
    r.register_broker("C", A2, "broker-b", 0, "", _wrapper(("T", 8)), [], channel=chan, now=100)
    expired = r.scan_not_active_broker(120, now=121)
    assert expired == [None, None], "broker-a's master and slave were silent since 0"
    assert set(r.broker_addr_table) == {"broker-b"}
    r.on_channel_destroy("127.0.0.1:55555", chan)
    assert r.broker_addr_table == {} and r.topic_queue_table == {} and r.cluster_addr_table == {}


def test_wipe_and_add_write_perm() -> None:
    r = _two_masters_and_a_slave()
    assert r.wipe_write_perm_of_broker("broker-a") == 2
    route = r.pickup_topic_route_data("T")
    assert {q.brokerName: q.perm for q in route.queueDatas} == {"broker-a": 4, "broker-b": 6}  # type: ignore[union-attr]
    assert r.add_write_perm_of_broker("broker-a") == 2
    assert r.pickup_topic_route_data("OnlyA").queueDatas[0].perm == 6  # type: ignore[union-attr]


def test_topic_deletion_whole_or_per_cluster() -> None:
    r = _two_masters_and_a_slave()
    r.register_broker("D", "10.0.1.1:10911", "broker-x", 0, "", _wrapper(("T", 1)), [], now=0)
    r.delete_topic("T", "C")
    route = r.pickup_topic_route_data("T")
    assert route is not None and [q.brokerName for q in route.queueDatas] == ["broker-x"]
    r.delete_topic("T")
    assert r.pickup_topic_route_data("T") is None
    assert "T" not in r.get_all_topic_list()


def test_slave_promoted_to_master_keeps_one_entry() -> None:
    r = _two_masters_and_a_slave()
    r.register_broker("C", A1S, "broker-a", 0, "", _wrapper(("T", 4), counter=5), [], now=1)
    assert r.broker_addr_table["broker-a"].brokerAddrs == {0: A1S}
