"""Admin: the API behind ``mqadmin`` (topics, clusters, consumer progress, offsets, messages).

Every call resolves brokers through the NameServers, so it works on a cluster of several
brokers: topic creation goes to every master of a cluster, progress sums over every broker.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from typing import Any, Self

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQBrokerError, MQClientError
from rocketmq_py.client.instance import ClientConfig, MQClientInstance, MQClientManager
from rocketmq_py.client.message_id import nearly_time_from_id
from rocketmq_py.client.running_info import ConsumerRunningInfo
from rocketmq_py.common.properties import parse_properties
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol import fastjson_read
from rocketmq_py.remoting.protocol.acl import (
    CreateAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerClusterAclConfigResponseBody,
)
from rocketmq_py.remoting.protocol.admin import GroupList
from rocketmq_py.remoting.protocol.broker import decode_mq_keyed
from rocketmq_py.remoting.protocol.ha import HARuntimeInfo
from rocketmq_py.remoting.protocol.message import MessageExt, decode_offset_msg_id, decode_records
from rocketmq_py.remoting.protocol.route import MASTER_ID, ClusterInfo, KVTable, TopicList, TopicRouteData
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper


@dataclass
class OffsetWrapper:
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass
class TopicOffset:
    min_offset: int
    max_offset: int
    last_update_timestamp: int


class Admin:
    def __init__(self, namesrv_addr: str | None = None, *, timeout: float = 5.0, instance_name: str = "admin",
                 session_credentials: SessionCredentials | None = None,
                 use_tls: bool | ssl.SSLContext = False) -> None:
        self.config = ClientConfig(namesrv_addr=namesrv_addr, instance_name=instance_name,
                                   session_credentials=session_credentials, use_tls=use_tls)
        self.timeout = timeout
        self._instance: MQClientInstance | None = None

    async def start(self) -> None:
        if self._instance is None:
            self._instance = await MQClientManager.acquire(self.config)

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            await MQClientManager.release(instance)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- plumbing ---------------------------------------------------------------------------

    def _inst(self) -> MQClientInstance:
        if self._instance is None:
            raise MQClientError("Admin is not started: call start() first")
        return self._instance

    async def _call(self, addr: str, code: int, header: dict[str, str] | None = None, body: bytes | None = None,
                    ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        r = await self._inst().remoting.invoke(addr, RemotingCommand.request(code, header, body), self.timeout)
        if r.code not in ok:
            raise MQBrokerError(r.code, r.remark, addr)
        return r

    async def _namesrv(self, code: int, header: dict[str, str] | None = None) -> RemotingCommand:
        errors = []
        for addr in self.config.namesrv_addrs():
            try:
                return await self._call(addr, code, header)
            except Exception as exc:
                errors.append(f"{addr}: {exc}")
        raise MQClientError("no NameServer answered: " + ("; ".join(errors) or "none configured"))

    # -- clusters and topics ----------------------------------------------------------------

    async def examine_broker_cluster_info(self) -> ClusterInfo:
        return ClusterInfo.decode((await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)).body)

    async def fetch_all_topic_list(self) -> list[str]:
        return TopicList.decode((await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body).topicList

    async def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        return await self._inst().get_topic_route_from_namesrv(topic, self.timeout)

    async def create_topic(self, topic: str, *, cluster: str | None = None, broker_addr: str | None = None,
                           read_queue_nums: int = 8, write_queue_nums: int = 8, perm: int = 6,
                           order: bool = False) -> list[str]:
        """Create or update the topic on one broker, or on every master of a cluster."""
        targets = [broker_addr] if broker_addr else await self._cluster_masters(cluster)
        header = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read_queue_nums),
                  "writeQueueNums": str(write_queue_nums), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
                  "topicSysFlag": "0", "order": "true" if order else "false"}
        for addr in targets:
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        return targets

    async def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        for addr in await self._cluster_masters(cluster):
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        for addr in self.config.namesrv_addrs():
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})

    async def _cluster_masters(self, cluster: str | None) -> list[str]:
        info = await self.examine_broker_cluster_info()
        names = (info.clusterAddrTable.get(cluster, []) if cluster
                 else [n for ns in info.clusterAddrTable.values() for n in ns])
        masters = [info.brokerAddrTable[n].brokerAddrs[MASTER_ID] for n in names
                   if n in info.brokerAddrTable and MASTER_ID in info.brokerAddrTable[n].brokerAddrs]
        if not masters:
            raise MQClientError(f"no master broker found{f' in cluster {cluster}' if cluster else ''}")
        return masters

    async def _topic_masters(self, topic: str) -> dict[str, str]:
        route = await self.examine_topic_route_info(topic)
        return {bd.brokerName: bd.brokerAddrs[MASTER_ID] for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}

    async def examine_topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        stats: dict[MessageQueue, TopicOffset] = {}
        for addr in (await self._topic_masters(topic)).values():
            r = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            for (t, b, q), v in decode_mq_keyed(r.body or b"{}", "offsetTable").items():
                stats[MessageQueue(t, b, q)] = TopicOffset(v["minOffset"], v["maxOffset"], v["lastUpdateTimestamp"])
        return stats

    # -- consumers --------------------------------------------------------------------------

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups consuming ``topic``, online or holding offsets, on any of its brokers
        (Java asks only the first broker of the route)."""
        groups: set[str] = set()
        for addr in (await self._topic_masters(topic)).values():
            r = await self._call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            groups.update(GroupList.decode(r.body or b"{}").groupList)
        return sorted(groups)

    async def examine_consume_stats(self, group: str, topic: str | None = None) -> dict[MessageQueue, OffsetWrapper]:
        """Per queue: the broker's max offset, the group's committed offset, and so the lag."""
        topics = [topic] if topic else [t for t in await self.fetch_all_topic_list() if not t.startswith("%")]
        brokers: dict[str, str] = {}
        for t in topics:
            try:
                brokers.update(await self._topic_masters(t))
            except MQClientError:
                continue
        table: dict[MessageQueue, OffsetWrapper] = {}
        for addr in brokers.values():
            header = {"consumerGroup": group, **({"topic": topic} if topic else {})}
            r = await self._call(addr, RequestCode.GET_CONSUME_STATS, header)
            for (t, b, q), v in decode_mq_keyed(r.body or b"{}", "offsetTable").items():
                table[MessageQueue(t, b, q)] = OffsetWrapper(v["brokerOffset"], v["consumerOffset"], v["lastTimestamp"])
        return table

    async def reset_offset_by_timestamp(self, topic: str, group: str, timestamp: int, force: bool = True
                                        ) -> dict[MessageQueue, int]:
        """Set the group's offsets on every broker to the first message stored at ``timestamp``
        (-1: the end); live consumers are told to follow (RESET_CONSUMER_CLIENT_OFFSET)."""
        result: dict[MessageQueue, int] = {}
        for addr in (await self._topic_masters(topic)).values():
            r = await self._call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                 {"topic": topic, "group": group, "timestamp": str(timestamp),
                                  "isForce": "true" if force else "false"},
                                 ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            for (t, b, q), off in decode_mq_keyed(r.body or b"{}", "offsetTable").items():
                result[MessageQueue(t, b, q)] = int(off)
        return result

    async def get_consumer_running_info(self, group: str, client_id: str, jstack: bool = False
                                        ) -> ConsumerRunningInfo:
        """Ask a live consumer, through a broker it is connected to, what it is doing."""
        last: MQClientError | None = None
        for addr in await self._cluster_masters(None):
            try:
                r = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, {
                    "consumerGroup": group, "clientId": client_id, "jstackEnable": "true" if jstack else "false"})
            except MQClientError as exc:
                last = exc  # not connected to this broker; try the next one
                continue
            return ConsumerRunningInfo.decode(r.body or b"{}")
        raise last or MQClientError(f"The Consumer <{group}> <{client_id}> not online")

    async def examine_consumer_connection_info(self, group: str, broker_addr: str | None = None
                                               ) -> dict[str, Any]:
        """The group's connections as one broker sees them: ``broker_addr``, else the first
        master that knows the group online."""
        for addr in [broker_addr] if broker_addr else await self._cluster_masters(None):
            r = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                                 ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            if r.code == ResponseCode.SUCCESS and r.body:
                connection: dict[str, Any] = json.loads(r.body)
                return connection
        raise MQClientError(f"the consumer group[{group}] is not online", ResponseCode.CONSUMER_NOT_ONLINE)

    # -- messages ---------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """By offset message id: it names the broker's address and the CommitLog offset."""
        (host, port), offset = decode_offset_msg_id(offset_msg_id)
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        r = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        return next(decode_records(r.body or b"", decompress=True))

    async def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                            end: int = 2**63 - 1, unique_key: bool = False) -> list[MessageExt]:
        found: list[MessageExt] = []
        header = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
                  "endTimestamp": str(end), **({"_UNIQUE_KEY_QUERY": "true"} if unique_key else {})}
        for addr in (await self._topic_masters(topic)).values():
            r = await self._call(addr, RequestCode.QUERY_MESSAGE, header,
                                 ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if r.code == ResponseCode.SUCCESS:
                found.extend(decode_records(r.body or b"", decompress=True))
        return found[:max_num]

    async def query_message_by_unique_key(self, topic: str, msg_id: str) -> MessageExt | None:
        found = await self.query_message(topic, msg_id, unique_key=True)
        return next((m for m in found if m.msg_id == msg_id), None)

    async def query_message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int
                                      ) -> MessageExt | None:
        addr = (await self._topic_masters(topic)).get(broker_name)
        if addr is None:
            raise MQClientError(f"broker {broker_name} does not serve topic {topic}")
        header = {"consumerGroup": "TOOLS_CONSUMER", "topic": topic, "queueId": str(queue_id),
                  "queueOffset": str(offset), "maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0",
                  "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*"}
        r = await self._call(addr, RequestCode.PULL_MESSAGE, header,
                             ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED))
        if r.code != ResponseCode.SUCCESS or not r.body:
            return None
        return next(decode_records(r.body, decompress=True), None)

    # -- additions for mqadmin: brokers, subscription groups, KV config, raw pulls ----------
    # (RocketMQ's DefaultMQAdminExt has each of these; mqadmin's commands map onto them.)

    async def broker_addrs(self, broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """The brokers an admin command targets: ``-b`` if given, else every master of ``-c``
        (or of every cluster), as mqadmin's ``-b``/``-c`` pairs do."""
        return [broker_addr] if broker_addr else await self._cluster_masters(cluster)

    async def fetch_broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        r = await self._call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return KVTable.decode(r.body or b"{}").table

    async def get_broker_ha_status(self, broker_addr: str) -> HARuntimeInfo:
        """RocketMQ 5.x's getBrokerHAStatus (GET_BROKER_HA_STATUS)."""
        r = await self._call(broker_addr, RequestCode.GET_BROKER_HA_STATUS)
        return HARuntimeInfo.decode(r.body or b"{}")

    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        r = await self._call(broker_addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties((r.body or b"").decode())

    async def update_broker_config(self, broker_addr: str, props: dict[str, str]) -> None:
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
        await self._call(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)

    # -- ACL (plain_acl.yml of brokers with aclEnable=true) -----------------------------------

    async def create_and_update_plain_access_config(self, broker_addr: str,
                                                    header: CreateAccessConfigRequestHeader) -> None:
        await self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header.to_ext_fields())

    async def delete_plain_access_config(self, broker_addr: str, access_key: str) -> None:
        await self._call(broker_addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    async def update_global_white_addr_config(self, broker_addr: str, addresses: str,
                                              acl_file_full_path: str | None = None) -> None:
        header = {"globalWhiteAddrs": addresses}
        if acl_file_full_path:
            header["aclFileFullPath"] = acl_file_full_path
        await self._call(broker_addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)

    async def examine_broker_cluster_acl_version_info(self, broker_addr: str) -> GetBrokerAclConfigResponseHeader:
        r = await self._call(broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        return GetBrokerAclConfigResponseHeader.from_ext_fields(r.ext_fields or {})

    async def get_broker_cluster_acl_config(self, broker_addr: str) -> GetBrokerClusterAclConfigResponseBody:
        r = await self._call(broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        return GetBrokerClusterAclConfigResponseBody.decode(r.body)

    async def create_subscription_group(self, broker_addr: str, config: SubscriptionGroupConfig) -> None:
        await self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.encode())

    async def get_all_subscription_groups(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        r = await self._call(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return SubscriptionGroupWrapper.decode(r.body or b"{}").subscriptionGroupTable

    async def fetch_consumer_offset_groups(self, broker_addr: str) -> set[str]:
        """Groups with committed offsets on a broker (GET_ALL_CONSUMER_OFFSET's ``topic@group`` keys):
        a group that only ever committed offsets has no subscription group config to list."""
        r = await self._call(broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = json.loads(r.body or b"{}").get("offsetTable", {})
        return {key.split("@", 1)[1] for key in table if "@" in key}

    async def delete_subscription_group(self, broker_addr: str, group: str, remove_offset: bool = False) -> None:
        await self._call(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                         {"groupName": group, "removeOffset": "true" if remove_offset else "false"})

    async def examine_producer_connection_info(self, group: str, topic: str) -> dict[str, Any]:
        """Producers are known to the brokers serving the topic they send to (heartbeats)."""
        connections: list[dict[str, Any]] = []
        for addr in (await self._topic_masters(topic)).values():
            r = await self._call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group},
                                 ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
            if r.code == ResponseCode.SUCCESS and r.body:
                seen = {c["clientId"] for c in connections}
                connections += [c for c in json.loads(r.body).get("connectionSet", []) if c["clientId"] not in seen]
        if not connections:
            raise MQClientError(f"the producer group[{group}] has no connection to the brokers of topic {topic}")
        return {"connectionSet": connections}

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """Written to every NameServer: they share nothing, so each needs its own copy."""
        for addr in self._namesrv_list():
            await self._call(addr, RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        for addr in self._namesrv_list():
            r = await self._call(addr, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key},
                                 ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if r.code == ResponseCode.SUCCESS:
                return (r.ext_fields or {}).get("value")
        return None

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        for addr in self._namesrv_list():
            await self._call(addr, RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})

    async def wipe_write_perm_of_broker(self, broker_name: str) -> dict[str, int]:
        """Per NameServer, how many topics lost their write permission on ``broker_name``."""
        counts = {}
        for addr in self._namesrv_list():
            r = await self._call(addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
            counts[addr] = int((r.ext_fields or {}).get("wipeTopicCount", 0))
        return counts

    def _namesrv_list(self) -> list[str]:
        addrs = self.config.namesrv_addrs()
        if not addrs:
            raise MQClientError("no NameServer address: pass -n or set NAMESRV_ADDR")
        return addrs

    async def pull_messages(self, topic: str, broker_name: str, queue_id: int, offset: int, max_nums: int = 32
                            ) -> tuple[list[MessageExt], int]:
        """One raw pull without subscription state: the messages at ``offset`` and the next offset."""
        addr = (await self._topic_masters(topic)).get(broker_name)
        if addr is None:
            raise MQClientError(f"broker {broker_name} does not serve topic {topic}")
        header = {"consumerGroup": "TOOLS_CONSUMER", "topic": topic, "queueId": str(queue_id),
                  "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": "4", "commitOffset": "0",
                  "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*"}
        r = await self._call(addr, RequestCode.PULL_MESSAGE, header,
                             ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
                                 ResponseCode.PULL_RETRY_IMMEDIATELY))
        next_offset = int((r.ext_fields or {}).get("nextBeginOffset", offset))
        msgs = list(decode_records(r.body, decompress=True)) if r.code == ResponseCode.SUCCESS and r.body else []
        return msgs, next_offset

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        addr = (await self._topic_masters(mq.topic)).get(mq.broker_name)
        if addr is None:
            raise MQClientError(f"broker {mq.broker_name} does not serve topic {mq.topic}")
        await self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                         {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id),
                          "commitOffset": str(offset)})

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        addr = (await self._topic_masters(mq.topic)).get(mq.broker_name)
        if addr is None:
            raise MQClientError(f"broker {mq.broker_name} does not serve topic {mq.topic}")
        r = await self._call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                             {"topic": mq.topic, "queueId": str(mq.queue_id), "timestamp": str(timestamp)})
        return int((r.ext_fields or {})["offset"])

    # -- for mqadmin's operations commands (statsAll, brokerConsumeStats, queryCq, ...) -------

    async def all_broker_addrs(self) -> set[str]:
        """Every broker address the NameServers know, masters and slaves."""
        info = await self.examine_broker_cluster_info()
        return {addr for data in info.brokerAddrTable.values() for addr in data.brokerAddrs.values()}

    async def view_message_or_unique_key(self, msg_id: str, topic: str | None = None) -> MessageExt | None:
        """A message by the id any tool prints: an offset id naming one of the cluster's brokers is
        read there (VIEW_MESSAGE_BY_ID); anything else is a client's UNIQ_KEY, looked up from the
        time it encodes in ``topic``, or without one in every topic of every broker (Java's
        viewMessage falls back to queryMessageByUniqKey the same way)."""
        try:
            (host, port), _ = decode_offset_msg_id(msg_id)
            addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        except (ValueError, OverflowError):
            addr = None
        if addr is not None and addr in await self.all_broker_addrs():
            try:
                return await self.view_message(msg_id)
            except MQClientError:
                pass  # an id that only looks like this broker's: try it as a unique key
        begin = max(nearly_time_from_id(msg_id) - 1000, 0)
        topics = [topic] if topic else await self.fetch_all_topic_list()
        for name in topics:
            try:
                found = await self.query_message(name, msg_id, begin=begin, unique_key=True)
            except MQClientError:
                continue  # a topic without a route (being deleted) or a broker refusing it
            for msg in found:
                if msg.msg_id == msg_id:
                    return msg
        return None

    async def view_broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        """BrokerStatsData (statsMinute, statsHour, statsDay: sum, tps, avgpt) of one stat."""
        r = await self._call(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA,
                             {"statsName": stats_name, "statsKey": stats_key})
        stats: dict[str, Any] = json.loads(r.body or b"{}")
        return stats

    async def fetch_consume_stats_in_broker(self, broker_addr: str, is_order: bool = False) -> dict[str, Any]:
        """ConsumeStatsList: every group's consume stats on one broker, and their total diff."""
        r = await self._call(broker_addr, RequestCode.GET_BROKER_CONSUME_STATS,
                             {"isOrder": "true" if is_order else "false"})
        stats: dict[str, Any] = fastjson_read.loads(r.body or b"{}")
        return stats

    async def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int, index: int, count: int,
                                  group: str | None = None) -> dict[str, Any]:
        header = {"topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count)}
        if group:
            header["consumerGroup"] = group
        r = await self._call(broker_addr, RequestCode.QUERY_CONSUME_QUEUE, header)
        queue: dict[str, Any] = json.loads(r.body or b"{}")
        return queue

    async def clean_unused_topic(self, broker_addr: str) -> None:
        await self._call(broker_addr, RequestCode.CLEAN_UNUSED_TOPIC)

    async def get_namesrv_config(self, addrs: list[str] | None = None) -> dict[str, dict[str, str]]:
        """Each NameServer's running config (GET_NAMESRV_CONFIG), by address."""
        configs = {}
        for addr in addrs or self._namesrv_list():
            r = await self._call(addr, RequestCode.GET_NAMESRV_CONFIG)
            configs[addr] = parse_properties((r.body or b"").decode())
        return configs

    async def update_namesrv_config(self, props: dict[str, str], addrs: list[str] | None = None) -> list[str]:
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
        targets = addrs or self._namesrv_list()
        for addr in targets:
            await self._call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, body)
        return targets

    async def get_topic_cluster_list(self, topic: str) -> set[str]:
        """The clusters whose brokers serve ``topic`` (Java's getTopicClusterList)."""
        route = await self.examine_topic_route_info(topic)
        info = await self.examine_broker_cluster_info()
        names = {bd.brokerName for bd in route.brokerDatas}
        return {cluster for cluster, brokers in info.clusterAddrTable.items() if names & set(brokers)}

    async def update_consumer_offset_at(self, broker_addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        await self._call(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                         {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id),
                          "commitOffset": str(offset)})
