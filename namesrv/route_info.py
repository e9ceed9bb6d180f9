"""RouteInfoManager: the NameServer's whole state, as plain data with no I/O.

Five tables, as in RocketMQ 4.9.8: topic -> queue data per broker name; broker name ->
addresses by broker id; cluster -> broker names; broker address -> liveness; broker address
-> filter servers. Brokers register every 30 s; one that stops (or whose connection closes) is
removed with everything only it provided. Route answers are encoded once per topic and form and
cached until a change touches that topic, because clients ask for the same routes every 30 s
and a registration with an unchanged data version changes nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rocketmq_py.remoting.protocol.route import MASTER_ID, BrokerData, ClusterInfo, QueueData, TopicRouteData
from rocketmq_py.remoting.protocol.topic import DataVersion, PermName, TopicConfigSerializeWrapper

log = logging.getLogger("rocketmq.namesrv")

# TopicSysFlag bits.
_UNIT_FLAG = 0x1
_UNIT_SUB_FLAG = 0x2


@dataclass
class BrokerLiveInfo:
    last_update: float
    data_version: DataVersion
    channel: Any  # the broker's connection (closed when the broker expires); None in unit tests
    ha_server_addr: str


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass
class RouteInfoManager:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    # (topic, standard form) -> encoded TopicRouteData, dropped whenever the topic's route changes.
    _route_cache: dict[tuple[str, bool], bytes] = field(default_factory=dict)

    # -- registration -----------------------------------------------------------------------

    def register_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, topic_config_wrapper: TopicConfigSerializeWrapper | None,
                        filter_server_list: list[str] | None, channel: Any = None,
                        now: float | None = None) -> RegisterBrokerResult:
        now = time.monotonic() if now is None else now
        result = RegisterBrokerResult()
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = self.broker_addr_table[broker_name] = BrokerData(cluster=cluster_name,
                                                                           brokerName=broker_name)
        addrs = broker_data.brokerAddrs
        # A slave promoted to master (or the reverse) keeps its address under a new id: drop
        # the old id first so one address never appears twice.
        for bid in [b for b, a in addrs.items() if a == broker_addr and b != broker_id]:
            del addrs[bid]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        broker_data.brokerAddrs = dict(sorted(addrs.items()))
        register_first = register_first or old_addr is None
        if old_addr != broker_addr:
            self._invalidate_broker(broker_name)

        if topic_config_wrapper is not None and broker_id == MASTER_ID and (
                register_first or self.is_broker_topic_config_changed(broker_addr, topic_config_wrapper.dataVersion)):
            for config in topic_config_wrapper.topicConfigTable.values():
                self._create_and_update_queue_data(broker_name, QueueData(
                    brokerName=broker_name, perm=config.perm, readQueueNums=config.readQueueNums,
                    writeQueueNums=config.writeQueueNums, topicSysFlag=config.topicSysFlag), config.topicName)

        version = topic_config_wrapper.dataVersion if topic_config_wrapper is not None else DataVersion()
        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, version.model_copy(), channel, ha_server_addr)
        if previous is None:
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)

        if filter_server_list is not None:
            self._set_filter_servers(broker_addr, filter_server_list)

        if broker_id != MASTER_ID:
            master_addr = broker_data.brokerAddrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _create_and_update_queue_data(self, broker_name: str, queue_data: QueueData, topic: str) -> None:
        table = self.topic_queue_table.setdefault(topic, {})
        old = table.get(broker_name)
        if old is None:
            log.info("new topic registered, %s %s", topic, queue_data)
        elif old == queue_data:
            return
        else:
            log.info("topic changed, %s OLD: %s NEW: %s", topic, old, queue_data)
        table[broker_name] = queue_data
        self._invalidate_topic(topic)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live else None

    def update_broker_info_update_timestamp(self, broker_addr: str, now: float | None = None) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update = time.monotonic() if now is None else now

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        removed = self.broker_live_table.pop(broker_addr, None)
        self._set_filter_servers(broker_addr, [])
        log.info("unregisterBroker, remove from brokerLiveTable %s, %s", "OK" if removed else "Failed", broker_addr)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return
        broker_data.brokerAddrs.pop(broker_id, None)
        self._invalidate_broker(broker_name)
        if not broker_data.brokerAddrs:
            del self.broker_addr_table[broker_name]
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topic_by_broker_name(broker_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            table = self.topic_queue_table[topic]
            if table.pop(broker_name, None) is not None:
                log.info("removeTopicByBrokerName, remove one broker's topic %s %s", broker_name, topic)
                self._invalidate_topic(topic)
                if not table:
                    del self.topic_queue_table[topic]

    # -- liveness ---------------------------------------------------------------------------

    def scan_not_active_broker(self, expired_after: float, now: float | None = None) -> list[Any]:
        """Remove brokers silent for ``expired_after`` seconds; returns their channels to close."""
        now = time.monotonic() if now is None else now
        channels = []
        for addr, live in list(self.broker_live_table.items()):
            if now - live.last_update > expired_after:
                log.warning("The broker channel expired, %s %.0fs", addr, expired_after)
                channels.append(live.channel)
                self.on_channel_destroy(addr, live.channel)
        return channels

    def on_channel_destroy(self, remote_addr: str, channel: Any) -> None:
        """A broker connection closed: forget the broker that registered over it, at once."""
        broker_addr = next((a for a, live in self.broker_live_table.items()
                            if channel is not None and live.channel is channel), remote_addr)
        if broker_addr not in self.broker_live_table and not any(
                broker_addr in bd.brokerAddrs.values() for bd in self.broker_addr_table.values()):
            return
        log.info("the broker's channel destroyed, %s, clean it's data structure at once", broker_addr)
        self.broker_live_table.pop(broker_addr, None)
        self._set_filter_servers(broker_addr, [])
        removed_names: list[str] = []
        for name, data in list(self.broker_addr_table.items()):
            for bid in [b for b, a in data.brokerAddrs.items() if a == broker_addr]:
                del data.brokerAddrs[bid]
                self._invalidate_broker(name)
            if not data.brokerAddrs:
                del self.broker_addr_table[name]
                removed_names.append(name)
        for cluster, names in list(self.cluster_addr_table.items()):
            names.difference_update(removed_names)
            if not names:
                del self.cluster_addr_table[cluster]
        for name in removed_names:
            self._remove_topic_by_broker_name(name)

    # -- routes -----------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        route = TopicRouteData(queueDatas=list(queues.values()))
        for name in queues:
            data = self.broker_addr_table.get(name)
            if data is None:
                continue
            route.brokerDatas.append(data.model_copy(update={"brokerAddrs": dict(data.brokerAddrs)}))
            for addr in data.brokerAddrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    route.filterServerTable[addr] = list(servers)
        return route if route.brokerDatas else None

    def topic_route_body(self, topic: str, standard: bool, order_topic_conf: str | None) -> bytes | None:
        """The encoded route, from the cache when nothing about the topic changed."""
        key = (topic, standard)
        body = self._route_cache.get(key)
        if body is not None:
            return body
        route = self.pickup_topic_route_data(topic)
        if route is None:
            return None
        route.orderTopicConf = order_topic_conf
        body = route.encode_for(standard)
        self._route_cache[key] = body
        return body

    def invalidate_route_cache(self, topic: str | None = None) -> None:
        """Drop cached routes (all, or one topic's): KV order config changes call this."""
        if topic is None:
            self._route_cache.clear()
        else:
            self._invalidate_topic(topic)

    def _invalidate_topic(self, topic: str) -> None:
        self._route_cache.pop((topic, True), None)
        self._route_cache.pop((topic, False), None)

    def _set_filter_servers(self, broker_addr: str, servers: list[str]) -> None:
        """An empty list removes the entry (as RocketMQ does); a change reaches every cached route
        that lists this address, whichever broker name it is registered under."""
        old = self.filter_server_table.get(broker_addr, [])
        if servers:
            self.filter_server_table[broker_addr] = list(servers)
        else:
            self.filter_server_table.pop(broker_addr, None)
        if old != servers:
            for name, data in self.broker_addr_table.items():
                if broker_addr in data.brokerAddrs.values():
                    self._invalidate_broker(name)

    def _invalidate_broker(self, broker_name: str) -> None:
        for topic, queues in self.topic_queue_table.items():
            if broker_name in queues:
                self._invalidate_topic(topic)

    # -- admin ------------------------------------------------------------------------------

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._change_write_perm(broker_name, lambda perm: perm & ~PermName.PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._change_write_perm(broker_name, lambda perm: PermName.PERM_READ | PermName.PERM_WRITE)

    def _change_write_perm(self, broker_name: str, change: Any) -> int:
        count = 0
        for topic, queues in self.topic_queue_table.items():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm = change(qd.perm)
                count += 1
                self._invalidate_topic(topic)
        return count

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
        else:
            queues = self.topic_queue_table.get(topic, {})
            for name in self.cluster_addr_table.get(cluster_name, set()):
                queues.pop(name, None)
            if not queues:
                self.topic_queue_table.pop(topic, None)
        self._invalidate_topic(topic)

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(brokerAddrTable=dict(self.broker_addr_table),
                           clusterAddrTable={c: sorted(n) for c, n in self.cluster_addr_table.items()})

    def get_all_topic_list(self) -> list[str]:
        return list(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return [t for t, queues in self.topic_queue_table.items() if names & queues.keys()]

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (each a topic in RocketMQ), and one broker address."""
        # A set in Java: a cluster named like one of its brokers is listed once.
        topics = list(dict.fromkeys([*self.cluster_addr_table,
                                     *(n for names in self.cluster_addr_table.values() for n in sorted(names))]))
        addr = next((a for bd in self.broker_addr_table.values() for a in bd.brokerAddrs.values()), None)
        return topics, addr

    def get_unit_topics(self) -> list[str]:
        return self._topics_with(lambda flag: bool(flag & _UNIT_FLAG))

    def get_has_unit_sub_topic_list(self) -> list[str]:
        return self._topics_with(lambda flag: bool(flag & _UNIT_SUB_FLAG))

    def get_has_unit_sub_un_unit_topic_list(self) -> list[str]:
        return self._topics_with(lambda flag: not flag & _UNIT_FLAG and bool(flag & _UNIT_SUB_FLAG))

    def _topics_with(self, pred: Any) -> list[str]:
        return [t for t, queues in self.topic_queue_table.items()
                if queues and pred(next(iter(queues.values())).topicSysFlag)]
