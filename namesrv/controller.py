"""NamesrvController: wiring and lifecycle of one NameServer, usable in-process or from the CLI."""

from __future__ import annotations

import asyncio
import logging

from rocketmq_py.acl.plain_access_validator import PlainAccessValidator
from rocketmq_py.common.atomic_file import write_file_atomically
from rocketmq_py.common.properties import ConfigError, apply_properties, format_properties
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.namesrv.kv_config import KVConfigManager
from rocketmq_py.namesrv.processor import DefaultRequestProcessor
from rocketmq_py.namesrv.route_info import RouteInfoManager
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.connection import ConnectionEvents, RemotingConnection
from rocketmq_py.remoting.processor import ProcessorFunc
from rocketmq_py.remoting.server import RemotingServer
from rocketmq_py.remoting.server_config import NettyServerConfig

log = logging.getLogger("rocketmq.namesrv")

# The KV table is printed at debug level this often, as Java's NameServer does.
PRINT_KV_INTERVAL = 600.0


class BrokerHousekeepingService(ConnectionEvents):
    """A broker whose connection closes, idles out or fails is dropped at once, not after 120 s."""

    def __init__(self, routes: RouteInfoManager) -> None:
        self.routes = routes

    def on_close(self, conn: RemotingConnection) -> None:
        self.routes.on_channel_destroy(conn.remote_addr, conn)

    def on_idle(self, conn: RemotingConnection) -> None:
        self.routes.on_channel_destroy(conn.remote_addr, conn)

    def on_exception(self, conn: RemotingConnection, exc: BaseException) -> None:
        self.routes.on_channel_destroy(conn.remote_addr, conn)


class NamesrvController:
    def __init__(self, namesrv_config: NamesrvConfig | None = None,
                 server_config: NettyServerConfig | None = None) -> None:
        self.namesrv_config = namesrv_config or NamesrvConfig()
        self.server_config = server_config or NettyServerConfig(listenPort=9876)
        self.route_info_manager = RouteInfoManager()
        self.kv_config_manager = KVConfigManager(self.namesrv_config.kvConfigPath)
        self.remoting_server = RemotingServer(self.server_config.to_server_config(),
                                              BrokerHousekeepingService(self.route_info_manager))
        self._register_processors()
        cfg = self.namesrv_config
        self.access_validator: PlainAccessValidator | None = None
        if cfg.aclEnable:
            self.access_validator = PlainAccessValidator.from_config(cfg.rocketmqHome, cfg.aclPlainFile,
                                                                     cfg.aclWatchInterval)
            self.access_validator.install(self.remoting_server)
        self._tasks: list[asyncio.Task[None]] = []

    def _register_processors(self) -> None:
        """The NameServer's processor table: every request code it answers, in one place, as
        Java's NamesrvController.registerProcessor does (one DefaultRequestProcessor for all)."""
        processor = DefaultRequestProcessor(self)
        rows: list[tuple[RequestCode, ProcessorFunc]] = [
            (RequestCode.PUT_KV_CONFIG, processor.put_kv_config),
            (RequestCode.GET_KV_CONFIG, processor.get_kv_config),
            (RequestCode.DELETE_KV_CONFIG, processor.delete_kv_config),
            (RequestCode.GET_KVLIST_BY_NAMESPACE, processor.get_kv_list_by_namespace),
            (RequestCode.QUERY_DATA_VERSION, processor.query_data_version),
            (RequestCode.REGISTER_BROKER, processor.register_broker),
            (RequestCode.UNREGISTER_BROKER, processor.unregister_broker),
            (RequestCode.GET_ROUTEINFO_BY_TOPIC, processor.get_route_info_by_topic),
            (RequestCode.GET_BROKER_CLUSTER_INFO, processor.get_broker_cluster_info),
            (RequestCode.WIPE_WRITE_PERM_OF_BROKER, processor.wipe_write_perm_of_broker),
            (RequestCode.ADD_WRITE_PERM_OF_BROKER, processor.add_write_perm_of_broker),
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, processor.get_all_topic_list),
            (RequestCode.DELETE_TOPIC_IN_NAMESRV, processor.delete_topic_in_namesrv),
            (RequestCode.GET_TOPICS_BY_CLUSTER, processor.get_topics_by_cluster),
            (RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, processor.get_system_topic_list),
            (RequestCode.GET_UNIT_TOPIC_LIST, processor.get_unit_topic_list),
            (RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, processor.get_has_unit_sub_topic_list),
            (RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, processor.get_has_unit_sub_un_unit_topic_list),
            (RequestCode.UPDATE_NAMESRV_CONFIG, processor.update_config),
            (RequestCode.GET_NAMESRV_CONFIG, processor.get_config),
        ]
        for code, handler in rows:
            self.remoting_server.register_processor(code, handler)

    @property
    def address(self) -> str:
        host = self.server_config.bindAddress
        return f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.remoting_server.port}"

    async def start(self) -> None:
        self.kv_config_manager.load()
        await self.remoting_server.start()
        if self.access_validator is not None:
            self.access_validator.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._scan_not_active_broker()), loop.create_task(self._print_kv())]

    async def _scan_not_active_broker(self) -> None:
        # First scan after 5 s, as Java schedules it; then every scanNotActiveBrokerInterval.
        await asyncio.sleep(min(5.0, self.namesrv_config.scanNotActiveBrokerInterval / 1000))
        while True:
            expired_after = self.namesrv_config.brokerChannelExpiredTime / 1000
            for channel in self.route_info_manager.scan_not_active_broker(expired_after):
                if channel is not None:
                    channel.close("broker channel expired")
            await asyncio.sleep(self.namesrv_config.scanNotActiveBrokerInterval / 1000)

    async def _print_kv(self) -> None:
        while True:
            await asyncio.sleep(PRINT_KV_INTERVAL)
            self.kv_config_manager.print_all()

    def update_config(self, props: dict[str, str]) -> None:
        """Apply ``key=value`` updates to the running config and persist the result."""
        current = {**self.namesrv_config.model_dump(), **self.server_config.model_dump()}
        (namesrv_cfg, server_cfg), unknown = apply_properties([NamesrvConfig, NettyServerConfig],
                                                              {**current, **props})
        if unknown & props.keys():
            raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown & props.keys()))}")
        # type-ignored: the configs are built from the properties by the shared loader, typed as its base model
        order_changed = namesrv_cfg.orderMessageEnable != self.namesrv_config.orderMessageEnable  # type: ignore[attr-defined]
        self.namesrv_config = namesrv_cfg  # type: ignore[assignment]
        self.server_config = server_cfg  # type: ignore[assignment]
        if order_changed:
            self.route_info_manager.invalidate_route_cache()
        try:
            write_file_atomically(self.namesrv_config.configStorePath,
                                  format_properties(self.namesrv_config, self.server_config))
        except OSError as exc:
            log.warning("config updated in memory but not persisted to %s: %s",
                        self.namesrv_config.configStorePath, exc)

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.access_validator is not None:
            self.access_validator.shutdown()
        await self.remoting_server.close()
