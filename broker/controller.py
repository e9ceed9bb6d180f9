"""BrokerController: wiring and lifecycle of one broker (managers, store, servers, registration).

Start: load the tables, recover the store, listen on ``listenPort`` and the fast port
(``listenPort - 2``, every processor but pull), register with every NameServer, then keep
registering every ``registerNameServerPeriod`` and at once after any topic change. Shutdown:
unregister, stop accepting, persist offsets, flush and close the store (removing its abort file).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rocketmq_py.acl.plain_access_validator import PlainAccessValidator
from rocketmq_py.broker.client_housekeeping import ClientHousekeepingService, notify_consumer_ids_changed
from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.consumer_manager import ConsumerManager
from rocketmq_py.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketmq_py.broker.outer_api import BrokerOuterAPI
from rocketmq_py.broker.processors.admin import AdminBrokerProcessor
from rocketmq_py.broker.processors.admin_acl import AdminAclDisabledProcessor, AdminAclProcessor
from rocketmq_py.broker.processors.admin_client import AdminClientProcessor
from rocketmq_py.broker.processors.admin_consume import AdminConsumeProcessor
from rocketmq_py.broker.processors.admin_store import AdminStoreProcessor
from rocketmq_py.broker.processors.client_manage import ClientManageProcessor
from rocketmq_py.broker.processors.consumer_manage import ConsumerManageProcessor
from rocketmq_py.broker.processors.end_transaction import EndTransactionProcessor
from rocketmq_py.broker.processors.pull import PullMessageProcessor
from rocketmq_py.broker.processors.query import QueryMessageProcessor
from rocketmq_py.broker.processors.queue_lock import QueueLockProcessor
from rocketmq_py.broker.processors.send import SendMessageProcessor
from rocketmq_py.broker.processors.send_back import SendMessageBackProcessor
from rocketmq_py.broker.producer_manager import ProducerManager
from rocketmq_py.broker.pull_hold import PullRequestHoldService
from rocketmq_py.broker.rebalance_lock_manager import RebalanceLockManager
from rocketmq_py.broker.schedule_message_service import ScheduleMessageService
from rocketmq_py.broker.slave_synchronize import SlaveSynchronize
from rocketmq_py.broker.stats import BrokerStats
from rocketmq_py.broker.stats_manager import BrokerStatsManager
from rocketmq_py.broker.subscription_group_manager import SubscriptionGroupManager
from rocketmq_py.broker.topic_config_manager import TopicConfigManager
from rocketmq_py.broker.transaction.bridge import TransactionalMessageBridge
from rocketmq_py.broker.transaction.check_service import TransactionalMessageCheckService
from rocketmq_py.common.properties import ConfigError, apply_properties
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.processor import DEFAULT_MAX_CONCURRENCY, ProcessorFunc, RequestProcessor
from rocketmq_py.remoting.protocol.namesrv import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rocketmq_py.remoting.protocol.route import RegisterBrokerBody
from rocketmq_py.remoting.protocol.topic import PermName, TopicConfig, TopicConfigSerializeWrapper
from rocketmq_py.remoting.server import RemotingServer
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.remoting.tls import TlsMode, client_ssl_context, server_ssl_context
from rocketmq_py.store.config import BrokerRole, MessageStoreConfig
from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.broker")

# Java clamps the registration period to [10 s, 60 s].
REGISTER_PERIOD_BOUNDS = (10_000, 60_000)
HOUSEKEEPING_INTERVAL = 10.0


# Keys fixed once the broker runs (its identity, its listeners, what the store and services
# read when they start): UPDATE_BROKER_CONFIG refuses them rather than answering success for a
# value nothing reads. Every other BrokerConfig and MessageStoreConfig key is read where it is
# used and so takes effect at once.
STARTUP_ONLY_KEYS = frozenset({
    "rocketmqHome", "brokerIP1", "brokerIP2", "brokerName", "brokerClusterName", "brokerId", "metricsPort",
    "aclEnable", "aclPlainFile", "aclWatchInterval", "traceTopicEnable", "msgTraceTopicName",
    "storePathRootDir", "storePathCommitLog", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
    "flushDiskType", "warmMapedFileEnable", "warmAheadCommitLog", "warmCommitLogThreads", "brokerRole", "haListenPort",
    "haMasterAddress", "haSendHeartbeatInterval", "haHousekeepingInterval", "slaveTimeout", "checkCRCOnRecover",
    "messageIndexEnable", "messageIndexSafe", "messageIndexInChildProcess", "maxHashSlotNum", "maxIndexNum",
    "messageDelayLevel",
})


class BrokerController:
    def __init__(self, broker_config: BrokerConfig, server_config: NettyServerConfig | None = None,
                 store_config: MessageStoreConfig | None = None) -> None:
        self.broker_config = broker_config
        self.server_config = server_config or NettyServerConfig(listenPort=10911)
        self.store_config = store_config or MessageStoreConfig()
        root = self.store_config.storePathRootDir
        cfg = broker_config
        self.stats = BrokerStats()
        self.topic_config_manager = TopicConfigManager(
            root, broker_cluster_name=cfg.brokerClusterName, broker_name=cfg.brokerName,
            auto_create_topic_enable=cfg.autoCreateTopicEnable, default_topic_queue_nums=cfg.defaultTopicQueueNums,
            cluster_topic_enable=cfg.clusterTopicEnable, broker_topic_enable=cfg.brokerTopicEnable,
            trace_topic_enable=cfg.traceTopicEnable, msg_trace_topic_name=cfg.msgTraceTopicName,
            on_change=self._on_topic_change)
        self.subscription_group_manager = SubscriptionGroupManager(root, cfg.autoCreateSubscriptionGroup)
        self.consumer_offset_manager = ConsumerOffsetManager(root)
        expiry = cfg.channelExpiredTimeout / 1000
        self.producer_manager = ProducerManager(expiry)
        self.consumer_manager = ConsumerManager(self._on_consumer_ids_changed, expiry)
        self.rebalance_lock_manager = RebalanceLockManager(cfg.rebalanceLockMaxLiveTime / 1000)
        self.message_store = DefaultMessageStore(self.store_config)
        self.stats_manager = BrokerStatsManager(self)
        self.schedule_message_service = ScheduleMessageService(self.message_store)
        # The HA connection goes over TLS between brokers set to enforce it (docs/tls.md).
        if self.server_config.tls_server_mode is TlsMode.ENFORCING:
            self.message_store.ha_service.server_ssl = server_ssl_context(self.server_config)
        if self.server_config.tls_enable:
            self.message_store.ha_service.ha_client.client_ssl = client_ssl_context(self.server_config)
        # The processors reached from outside the table: for their hooks (metrics), held pulls
        self.send_processor = SendMessageProcessor(self)
        self.pull_processor = PullMessageProcessor(self)
        self.pull_hold = PullRequestHoldService(self.pull_processor.execute_held,
                                                self.message_store.get_max_offset_in_queue,
                                                cfg.pullHoldCheckInterval / 1000 if cfg.longPollingEnable else 1.0)
        # Arrivals go straight to the hold service: the store calls this once per new message.
        self.message_store.message_arriving_listener = self.pull_hold.on_message_arriving
        self.transaction_bridge = TransactionalMessageBridge(self.message_store, self.topic_config_manager,
                                                             lambda: self.store_host)
        self.transaction_check_service = TransactionalMessageCheckService(
            self.transaction_bridge, cfg, self.consumer_offset_manager, self.producer_manager, cfg.brokerName)
        self.housekeeping = ClientHousekeepingService(self.producer_manager, self.consumer_manager)
        self.remoting_server = RemotingServer(self.server_config.to_server_config(), self.housekeeping)
        self.fast_server = RemotingServer(self.server_config.to_server_config(port=self._fast_port()),
                                          self.housekeeping)
        self.access_validator: PlainAccessValidator | None = None
        if cfg.aclEnable:
            self.access_validator = PlainAccessValidator.from_config(cfg.rocketmqHome, cfg.aclPlainFile,
                                                                     cfg.aclWatchInterval)
            self.access_validator.install(self.remoting_server, self.fast_server)
        self._register_processors()
        self.outer_api = BrokerOuterAPI(client_ssl_context(self.server_config) if self.server_config.tls_enable
                                        else None, cfg.inner_client_credentials())
        self._tasks: list[asyncio.Task[None]] = []
        self._register_wakeup: asyncio.Event | None = None
        self.listen_port = self.server_config.listenPort
        self._store_host = ("", 0)
        self._learn_master_ha = False
        self.slave_synchronize = SlaveSynchronize(self)

    def _fast_port(self) -> int:
        port = self.server_config.listenPort
        return port - 2 if port > 2 else 0

    def _register_processors(self) -> None:
        """The broker's processor table: every request code it answers and its processor, in one
        place, as Java's BrokerController.registerProcessor lists them. The fast port (``listenPort
        - 2``) has the same rows but PULL_MESSAGE: it exists so sends never queue behind pulls.
        Sends and pulls may have 4,096 in flight (Java's larger send and pull pools); the rest the
        table's default."""
        send = self.send_processor
        consumer_manage = ConsumerManageProcessor(self)
        query = QueryMessageProcessor(self)
        client_manage = ClientManageProcessor(self)
        queue_lock = QueueLockProcessor(self)
        admin = AdminBrokerProcessor(self)
        admin_consume = AdminConsumeProcessor(self)
        admin_store = AdminStoreProcessor(self)
        admin_client = AdminClientProcessor(self)
        send_back = SendMessageBackProcessor(self)
        end_transaction = EndTransactionProcessor(self, self.transaction_bridge)
        rows: list[tuple[RequestCode, RequestProcessor | ProcessorFunc, int]] = [
            (RequestCode.SEND_MESSAGE, send, 4096),
            (RequestCode.SEND_MESSAGE_V2, send, 4096),
            (RequestCode.SEND_BATCH_MESSAGE, send, 4096),
            (RequestCode.CONSUMER_SEND_MSG_BACK, send_back.consumer_send_msg_back, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.QUERY_MESSAGE, query.query_message, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.VIEW_MESSAGE_BY_ID, query.view_message_by_id, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.HEART_BEAT, client_manage.heart_beat, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.UNREGISTER_CLIENT, client_manage.unregister_client, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.CHECK_CLIENT_CONFIG, client_manage.check_client_config, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumer_manage.get_consumer_list_by_group,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.UPDATE_CONSUMER_OFFSET, consumer_manage.update_consumer_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.QUERY_CONSUMER_OFFSET, consumer_manage.query_consumer_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_MAX_OFFSET, consumer_manage.get_max_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_MIN_OFFSET, consumer_manage.get_min_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, consumer_manage.search_offset_by_timestamp,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_EARLIEST_MSG_STORETIME, consumer_manage.get_earliest_msg_storetime,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.LOCK_BATCH_MQ, queue_lock.lock_batch_mq, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.UNLOCK_BATCH_MQ, queue_lock.unlock_batch_mq, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.END_TRANSACTION, end_transaction, DEFAULT_MAX_CONCURRENCY),
            # AdminBrokerProcessor's requests, by family
            (RequestCode.UPDATE_AND_CREATE_TOPIC, admin.update_and_create_topic, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.DELETE_TOPIC_IN_BROKER, admin.delete_topic, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_ALL_TOPIC_CONFIG, admin.get_all_topic_config, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_BROKER_RUNTIME_INFO, admin.get_broker_runtime_info, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_BROKER_HA_STATUS, admin.get_broker_ha_status, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.VIEW_BROKER_STATS_DATA, admin.view_broker_stats_data, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_TOPIC_STATS_INFO, admin.get_topic_stats_info, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_CONSUME_STATS, admin.get_consume_stats, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_CONSUMER_CONNECTION_LIST, admin.get_consumer_connection_list, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_PRODUCER_CONNECTION_LIST, admin.get_producer_connection_list, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, admin.update_and_create_subscription_group,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, admin.get_all_subscription_group, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, admin.delete_subscription_group, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, admin.get_all_consumer_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_ALL_DELAY_OFFSET, admin.get_all_delay_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, admin.reset_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.UPDATE_BROKER_CONFIG, admin.update_broker_config, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_BROKER_CONFIG, admin.get_broker_config, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, admin_consume.query_topic_consume_by_who, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_BROKER_CONSUME_STATS, admin_consume.fetch_all_consume_stats_in_broker,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.QUERY_CONSUME_TIME_SPAN, admin_consume.query_consume_time_span, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.QUERY_CORRECTION_OFFSET, admin_consume.query_correction_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.CLONE_GROUP_OFFSET, admin_consume.clone_group_offset, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.QUERY_CONSUME_QUEUE, admin_store.query_consume_queue, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, admin_store.clean_expired_consume_queue, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.DELETE_EXPIRED_COMMITLOG, admin_store.delete_expired_commit_log, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.CLEAN_UNUSED_TOPIC, admin_store.clean_unused_topic, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, admin_store.get_system_topic_list_from_broker,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.RESUME_CHECK_HALF_MESSAGE, admin_store.resume_check_half_message, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_CONSUMER_RUNNING_INFO, admin_client.get_consumer_running_info, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.CONSUME_MESSAGE_DIRECTLY, admin_client.consume_message_directly, DEFAULT_MAX_CONCURRENCY),
            (RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, admin_client.get_consumer_status,
             DEFAULT_MAX_CONCURRENCY),
            (RequestCode.GET_ALL_PRODUCER_INFO, admin_client.get_all_producer_info, DEFAULT_MAX_CONCURRENCY),
        ]
        if self.access_validator is not None:
            acl = AdminAclProcessor(self, self.access_validator.manager)
            rows += [
                (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, acl.update_and_create_access_config,
                 DEFAULT_MAX_CONCURRENCY),
                (RequestCode.DELETE_ACL_CONFIG, acl.delete_access_config, DEFAULT_MAX_CONCURRENCY),
                (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, acl.update_global_white_addrs_config,
                 DEFAULT_MAX_CONCURRENCY),
                (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, acl.get_broker_acl_config_version, DEFAULT_MAX_CONCURRENCY),
                (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, acl.get_broker_cluster_acl_config,
                 DEFAULT_MAX_CONCURRENCY),
            ]
        else:
            # The ACL's admin requests refused with Java's codes when ACL is off.
            refuse = AdminAclDisabledProcessor().refuse
            rows += [(code, refuse, DEFAULT_MAX_CONCURRENCY) for code in (
                RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)]
        for server in (self.remoting_server, self.fast_server):
            for code, processor, max_concurrency in rows:
                server.register_processor(code, processor, max_concurrency=max_concurrency)
        self.remoting_server.register_processor(RequestCode.PULL_MESSAGE, self.pull_processor, max_concurrency=4096)

    @property
    def store_host(self) -> tuple[str, int]:
        """The advertised address every stored message carries (the same tuple object while the
        address holds: the store caches its bytes by it, once per send)."""
        host = self._store_host
        if host[0] != self.broker_config.brokerIP1 or host[1] != self.listen_port:
            host = self._store_host = (self.broker_config.brokerIP1, self.listen_port)
        return host

    @property
    def broker_addr(self) -> str:
        return self.broker_config.broker_addr(self.listen_port)

    # -- events -----------------------------------------------------------------------------

    def _on_consumer_ids_changed(self, group: str, channels: list[RemotingConnection]) -> None:
        if self.broker_config.notifyConsumerIdsChangedEnable:
            notify_consumer_ids_changed(group, channels)

    def _on_topic_change(self, config: TopicConfig) -> None:
        # Clients poll routes every 30 s; registering now is what makes a new topic routable now.
        if self._register_wakeup is not None:
            self._register_wakeup.set()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        for manager in (self.topic_config_manager, self.subscription_group_manager, self.consumer_offset_manager,
                        self.schedule_message_service):
            if not manager.load():
                raise RuntimeError(f"{manager.config_file_path()} and its backup are both unreadable")
        await self.message_store.load()
        await self.message_store.start()
        try:
            await self.message_store.ha_service.start(self.server_config.bindAddress)
        except OSError as exc:
            # Taken (a second broker on this host with the default port): any free port rather than
            # fail; registration tells the NameServer, and through it the slaves, which one.
            log.warning("HA port %d unavailable (%s): listening on a free port", self.store_config.haListenPort, exc)
            self.store_config.haListenPort = 0
            await self.message_store.ha_service.start(self.server_config.bindAddress)
        await self.remoting_server.start()
        self.listen_port = self.remoting_server.port
        try:
            await self.fast_server.start()
        except OSError:
            # The fast port (listenPort - 2) is taken: serve it on any free port rather than fail.
            self.fast_server.config.port = 0
            await self.fast_server.start()
        self.pull_hold.start()
        if self.access_validator is not None:
            self.access_validator.start()
        if self.store_config.brokerRole is not BrokerRole.SLAVE:
            # Only a master delivers delayed messages and checks back half messages: a slave's
            # queues are copies (Java starts both on becoming master).
            self.schedule_message_service.start()
            self.transaction_check_service.start()
        loop = asyncio.get_running_loop()
        self._register_wakeup = asyncio.Event()
        ha_master = self.store_config.haMasterAddress
        # Java's rule: a slave given haMasterAddress (6 characters or more) follows it; one without
        # learns its master's HA address from every registration's answer.
        self._learn_master_ha = self.store_config.brokerRole is BrokerRole.SLAVE and not (
            ha_master and len(ha_master) >= 6)
        if self.store_config.brokerRole is BrokerRole.SLAVE and not self._learn_master_ha:
            assert ha_master is not None
            self.message_store.ha_service.update_master_address(ha_master)
        await self.register_broker_all()
        self._tasks = [loop.create_task(self._registration_loop()), loop.create_task(self._persist_offsets_loop()),
                       loop.create_task(self._housekeeping_loop()), loop.create_task(self.stats.run_sampling()),
                       loop.create_task(self.stats.run_morning_records()), loop.create_task(self.stats_manager.run())]
        if self.store_config.brokerRole is BrokerRole.SLAVE:
            self._tasks.append(loop.create_task(self.slave_synchronize.run()))
        else:
            self._tasks.append(loop.create_task(self._print_master_and_slave_diff()))

    async def register_broker_all(self) -> None:
        cfg = self.broker_config
        addrs = cfg.namesrv_addr_list()
        if not addrs:
            return
        table = {}
        for name, config in self.topic_config_manager.table.items():
            if not PermName.is_writeable(cfg.brokerPermission) or not PermName.is_readable(cfg.brokerPermission):
                config = config.model_copy(update={"perm": config.perm & cfg.brokerPermission})
            table[name] = config
        body = RegisterBrokerBody(topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
            dataVersion=self.topic_config_manager.data_version.model_copy(), topicConfigTable=table))
        header = RegisterBrokerRequestHeader(brokerName=cfg.brokerName, brokerAddr=self.broker_addr,
                                             clusterName=cfg.brokerClusterName,
                                             haServerAddr=cfg.ha_server_addr(self.message_store.ha_service.port),
                                             brokerId=cfg.brokerId)
        results = await self.outer_api.register_broker_all(addrs, header, body, cfg.registerBrokerTimeoutMills / 1000,
                                                           cfg.compressedRegister)
        for _, response in results:
            if response is None:
                continue
            answer = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields or {})
            if self._learn_master_ha and answer.haServerAddr:
                self.message_store.ha_service.update_master_address(answer.haServerAddr)
            self.slave_synchronize.master_addr = answer.masterAddr
        for _, response in results:
            order = self.outer_api.order_topic_config(response)
            if order is not None:
                self.topic_config_manager.update_order_topic_config(order)
                break

    async def _registration_loop(self) -> None:
        assert self._register_wakeup is not None
        low, high = REGISTER_PERIOD_BOUNDS
        while True:
            period = min(max(self.broker_config.registerNameServerPeriod, low), high) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._register_wakeup.wait(), period)
            self._register_wakeup.clear()
            try:
                await self.register_broker_all()
            except Exception:
                log.exception("registerBrokerAll failed")

    async def _persist_offsets_loop(self) -> None:
        while True:
            await asyncio.sleep(self.broker_config.flushConsumerOffsetInterval / 1000)
            try:
                await self.consumer_offset_manager.persist_async()
            except OSError as exc:
                log.error("persist consumer offsets failed: %s", exc)

    async def _print_master_and_slave_diff(self) -> None:
        """Java's printMasterAndSlaveDiff: a master logs how far its slave is behind, 10 s after
        start and every minute."""
        await asyncio.sleep(10)
        while True:
            log.info("Slave fall behind master: %d bytes", self.message_store.ha_service.slave_fall_behind_much())
            await asyncio.sleep(60)

    async def _housekeeping_loop(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            self.housekeeping.scan_exception_channels()

    def update_config(self, props: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: every key type-checked and applied to the running broker and
        store, or the whole update refused (ConfigError naming each refused key and why) with
        nothing changed. Keys the broker reads only at start-up are refused, not silently kept:
        Java sets them and they take effect, if ever, after a restart (docs/admin-codes.md)."""
        server_keys = set(NettyServerConfig.model_fields) | {
            f.alias for f in NettyServerConfig.model_fields.values() if f.alias}
        problems = [f"{key}: unknown config key" for key in sorted(props)
                    if key not in BrokerConfig.model_fields and key not in MessageStoreConfig.model_fields
                    and key not in server_keys]
        problems += [f"{key}: read only at start-up; set it in the broker's config file and restart"
                     for key in sorted(props) if key in STARTUP_ONLY_KEYS or key in server_keys]
        if problems:
            raise ConfigError("; ".join(problems))
        targets: list[tuple[BrokerConfig | MessageStoreConfig, dict[str, str]]] = []
        for config in (self.broker_config, self.store_config):
            mine = {k: v for k, v in props.items() if k in type(config).model_fields}
            if mine:
                # The whole model validated with the new values first: a bad value refuses the
                # update before anything is assigned.
                apply_properties([type(config)], {**config.model_dump(exclude_none=True), **mine})
                targets.append((config, mine))
        for config, mine in targets:
            (updated,), _ = apply_properties([type(config)], {**config.model_dump(exclude_none=True), **mine})
            for key in mine:
                setattr(config, key, getattr(updated, key))
        if self._register_wakeup is not None:
            self._register_wakeup.set()

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        cfg = self.broker_config
        addrs = cfg.namesrv_addr_list()
        if addrs:
            await self.outer_api.unregister_broker_all(addrs, UnRegisterBrokerRequestHeader(
                brokerName=cfg.brokerName, brokerAddr=self.broker_addr, clusterName=cfg.brokerClusterName,
                brokerId=cfg.brokerId), 3.0)
        await self.outer_api.close()
        if self.access_validator is not None:
            self.access_validator.shutdown()
        await self.transaction_check_service.shutdown()
        await self.pull_hold.shutdown()
        await self.remoting_server.close()
        await self.fast_server.close()
        self.consumer_offset_manager.persist()
        await self.topic_config_manager.persisted()  # no older snapshot may land after this write
        self.topic_config_manager.persist()
        self.subscription_group_manager.persist()
        await self.schedule_message_service.shutdown()
        await self.message_store.ha_service.shutdown()
        await self.message_store.shutdown()
        log.info("broker %s shut down, store at %s", cfg.brokerName, self.store_config.storePathRootDir)
