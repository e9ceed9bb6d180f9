"""The NameServer's request handlers (Java's DefaultRequestProcessor), one per code; their table is
NamesrvController._register_processors.

Every handler validates what it reads and answers bad input with an error code and a remark
(the broker's processors' shape, broker/processors/__init__.py); nothing a client sends can
change the registry unless the whole request is valid.
"""

from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING

from rocketmq_py.common.properties import ConfigError, format_properties, parse_properties
from rocketmq_py.namesrv.config import CONFIG_BLACK_LIST
from rocketmq_py.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG
from rocketmq_py.remoting.codes import V3_0_11, V4_9_4, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.exceptions import RemotingCommandException
from rocketmq_py.remoting.header import INT32_MAX
from rocketmq_py.remoting.protocol.json_body import first_error
from rocketmq_py.remoting.protocol.namesrv import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rocketmq_py.remoting.protocol.route import MASTER_ID, RegisterBrokerBody, TopicList
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfigSerializeWrapper, queue_nums_problem

if TYPE_CHECKING:
    from rocketmq_py.namesrv.controller import NamesrvController

log = logging.getLogger("rocketmq.namesrv")

# Broker ids are Java longs, but the C++ client keeps a route's brokerAddrs as map<int, string>,
# and every deployment numbers its slaves from 1: a larger id is refused rather than routed.
MAX_BROKER_ID = INT32_MAX
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


class DefaultRequestProcessor:
    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller
        self.routes = controller.route_info_manager
        self.kv = controller.kv_config_manager

    # -- KV config --------------------------------------------------------------------------

    async def put_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(PutKVConfigRequestHeader)
        self.kv.put_kv_config(h.namespace, h.key, h.value)
        if h.namespace == NAMESPACE_ORDER_TOPIC_CONFIG:
            self.routes.invalidate_route_cache(h.key)
        return request.response()

    async def get_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetKVConfigRequestHeader)
        value = self.kv.get_kv_config(h.namespace, h.key)
        if value is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: "
                                                                   f"{h.key}")
        return request.response(header=GetKVConfigResponseHeader(value=value))

    async def delete_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(DeleteKVConfigRequestHeader)
        self.kv.delete_kv_config(h.namespace, h.key)
        if h.namespace == NAMESPACE_ORDER_TOPIC_CONFIG:
            self.routes.invalidate_route_cache(h.key)
        return request.response()

    async def get_kv_list_by_namespace(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetKVListByNamespaceRequestHeader)
        body = self.kv.get_kv_list_by_namespace(h.namespace)
        if body is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}")
        return request.response(body=body)

    # -- brokers ----------------------------------------------------------------------------

    async def register_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(RegisterBrokerRequestHeader)
        if not MASTER_ID <= h.brokerId <= MAX_BROKER_ID:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"the custom field <brokerId> is out of range: {h.brokerId} (0 is the master, "
                                    f"1 to {MAX_BROKER_ID} its slaves)")
        body = request.body or b""
        if h.bodyCrc32 and (zlib.crc32(body) & 0x7FFFFFFF) != h.bodyCrc32:
            log.warning("receive registerBroker request,crc32 not match, from %s", conn.remote_addr)
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        filters: list[str] | None = None
        wrapper: TopicConfigSerializeWrapper | None = None
        if not body and request.version >= V3_0_11:
            # Java registers a bodiless broker with an empty table at data version 0/0, so a
            # later QUERY_DATA_VERSION compares against that, not against our clock.
            wrapper = TopicConfigSerializeWrapper(dataVersion=DataVersion(counter=0, timestamp=0))
        elif body:
            try:
                if h.compressed:
                    reg = RegisterBrokerBody.decode_compressed(body)
                    wrapper, filters = reg.topicConfigSerializeWrapper, reg.filterServerList
                elif request.version >= V3_0_11:
                    reg = RegisterBrokerBody.decode(body)
                    wrapper, filters = reg.topicConfigSerializeWrapper, reg.filterServerList
                else:
                    wrapper = TopicConfigSerializeWrapper.decode(body)
            except (ValueError, zlib.error) as exc:  # pydantic's ValidationError is a ValueError
                log.warning("bad registerBroker body from %s: %s", conn.remote_addr, exc)
                raise RemotingCommandException(f"bad register broker body: {first_error(exc)}") from None
        for topic, config in (wrapper.topicConfigTable.items() if wrapper is not None else ()):
            problem = queue_nums_problem(config.readQueueNums, config.writeQueueNums, least=0)
            if problem:  # refused whole: a route with it would hang every client that expands it
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"bad register broker body: topic[{topic}]: {problem}")
        result = self.routes.register_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId,
                                             h.haServerAddr, wrapper, filters, conn)
        return request.response(
            header=RegisterBrokerResponseHeader(haServerAddr=result.ha_server_addr, masterAddr=result.master_addr),
            body=self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG))

    async def unregister_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(UnRegisterBrokerRequestHeader)
        self.routes.unregister_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId)
        return request.response()

    async def query_data_version(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryDataVersionRequestHeader)
        version = DataVersion.decode_request(request.body, "data version body")
        changed = self.routes.is_broker_topic_config_changed(h.brokerAddr, version)
        if not changed:
            self.routes.update_broker_info_update_timestamp(h.brokerAddr)
        stored = self.routes.query_broker_topic_config(h.brokerAddr)
        return request.response(header=QueryDataVersionResponseHeader(changed=changed),
                                body=stored.encode() if stored else None)

    async def wipe_write_perm_of_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(WipeWritePermOfBrokerRequestHeader)
        count = self.routes.wipe_write_perm_of_broker(h.brokerName)
        log.info("wipe write perm of broker[%s], client: %s, %d", h.brokerName, conn.remote_addr, count)
        return request.response(header=WipeWritePermOfBrokerResponseHeader(wipeTopicCount=count))

    async def add_write_perm_of_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(AddWritePermOfBrokerRequestHeader)
        count = self.routes.add_write_perm_of_broker(h.brokerName)
        return request.response(header=AddWritePermOfBrokerResponseHeader(addTopicCount=count))

    # -- routes and topics ------------------------------------------------------------------

    async def get_route_info_by_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetRouteInfoRequestHeader)
        standard = request.version >= V4_9_4 or bool(h.acceptStandardJsonOnly)
        order_conf = (self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, h.topic)
                      if self.controller.namesrv_config.orderMessageEnable else None)
        body = self.routes.topic_route_body(h.topic, standard, order_conf)
        if body is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"No topic route info in name server for the topic: {h.topic}{FAQ_SUFFIX}")
        return request.response(body=body)

    async def get_broker_cluster_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.get_all_cluster_info().encode())

    async def get_all_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=TopicList(topicList=self.routes.get_all_topic_list()).encode())

    async def delete_topic_in_namesrv(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(DeleteTopicFromNamesrvRequestHeader)
        self.routes.delete_topic(h.topic, h.clusterName)
        return request.response()

    async def get_topics_by_cluster(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetTopicsByClusterRequestHeader)
        return request.response(body=TopicList(topicList=self.routes.get_topics_by_cluster(h.cluster)).encode())

    async def get_system_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topics, addr = self.routes.get_system_topic_list()
        return request.response(body=TopicList(topicList=topics, brokerAddr=addr).encode())

    async def get_unit_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=TopicList(topicList=self.routes.get_unit_topics()).encode())

    async def get_has_unit_sub_topic_list(self, conn: RemotingConnection,
                                          request: RemotingCommand) -> RemotingCommand:
        return request.response(body=TopicList(topicList=self.routes.get_has_unit_sub_topic_list()).encode())

    async def get_has_unit_sub_un_unit_topic_list(self, conn: RemotingConnection,
                                                  request: RemotingCommand) -> RemotingCommand:
        return request.response(body=TopicList(topicList=self.routes.get_has_unit_sub_un_unit_topic_list()).encode())

    # -- config -----------------------------------------------------------------------------

    async def update_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties((request.body or b"").decode())
        except UnicodeDecodeError:
            return request.response(ResponseCode.SYSTEM_ERROR, "config body is not UTF-8 text")
        blocked = CONFIG_BLACK_LIST & props.keys()
        if blocked:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"Can not update config in black list: {', '.join(sorted(blocked))}")
        try:
            self.controller.update_config(props)
        except ConfigError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("updateConfig called by %s: %s", conn.remote_addr, props)
        return request.response()

    async def get_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        c = self.controller
        return request.response(body=format_properties(c.namesrv_config, c.server_config).encode())



