"""The per-topic route cache never serves a stale route, whatever sequence of changes happens.

Clients ask for the same routes every 30 s, so GET_ROUTEINFO_BY_TOPIC answers from encoded
bodies cached per topic. This drives RouteInfoManager through random registrations (masters,
slaves, new data versions), unregistrations, channel closes, expiry, permission changes and topic
deletions, and after every step compares each cached answer with one built from the tables.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.namesrv.route_info import RouteInfoManager
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper

TOPICS = ["T0", "T1", "T2", "T3"]
BROKERS = ["broker-a", "broker-b", "broker-c"]
CHANNELS = {f"10.0.0.{i}:10911": object() for i in range(6)}
ADDRS = list(CHANNELS)

register = st.tuples(st.just("register"), st.sampled_from(BROKERS), st.sampled_from(ADDRS), st.integers(0, 2),
                     st.lists(st.sampled_from(TOPICS), unique=True, max_size=4), st.integers(1, 3), st.integers(1, 8))
ops = st.one_of(
    register,
    st.tuples(st.just("unregister"), st.sampled_from(BROKERS), st.sampled_from(ADDRS), st.integers(0, 2)),
    st.tuples(st.just("close"), st.sampled_from(ADDRS)),
    st.tuples(st.just("wipe"), st.sampled_from(BROKERS)),
    st.tuples(st.just("add_perm"), st.sampled_from(BROKERS)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS), st.sampled_from([None, "C0", "C1"])),
    st.tuples(st.just("expire"), st.integers(0, 50)),
    st.tuples(st.just("filters"), st.sampled_from(BROKERS), st.sampled_from(ADDRS), st.booleans()),
)


def _apply(r: RouteInfoManager, op: tuple, now: float) -> None:  # type: ignore[type-arg]
    kind = op[0]
    if kind == "register":
        _, name, addr, bid, topics, counter, queues = op
        wrapper = TopicConfigSerializeWrapper(
            dataVersion=DataVersion(counter=counter, timestamp=1),
            topicConfigTable={t: TopicConfig(topicName=t, readQueueNums=queues, writeQueueNums=queues) for t in topics})
        r.register_broker(f"C{BROKERS.index(name) % 2}", addr, name, bid, addr, wrapper, [], CHANNELS[addr], now=now)
    elif kind == "unregister":
        _, name, addr, bid = op
        r.unregister_broker(f"C{BROKERS.index(name) % 2}", addr, name, bid)
    elif kind == "close":
        r.on_channel_destroy("127.0.0.1:40000", CHANNELS[op[1]])
    elif kind == "wipe":
        r.wipe_write_perm_of_broker(op[1])
    elif kind == "add_perm":
        r.add_write_perm_of_broker(op[1])
    elif kind == "delete":
        r.delete_topic(op[1], op[2])
    elif kind == "expire":
        r.scan_not_active_broker(120, now=now + op[1] * 10)
    elif kind == "filters":
        _, name, addr, on = op
        r.register_broker(f"C{BROKERS.index(name) % 2}", addr, name, 1, addr, None, ["f:1"] if on else [],
                          CHANNELS[addr], now=now)


@settings(max_examples=300)
@given(st.lists(ops, min_size=1, max_size=25))
def test_cached_routes_always_equal_fresh_ones(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    r = RouteInfoManager()
    for i, op in enumerate(steps):
        _apply(r, op, now=float(i))
        for topic in TOPICS:
            for standard in (True, False):
                cached = r.topic_route_body(topic, standard, None)
                fresh = r.pickup_topic_route_data(topic)
                expected = fresh.encode_for(standard) if fresh is not None else None
                assert cached == expected, f"stale route for {topic} after step {i}: {op}"
