"""Client liveness on the broker (Java's ClientHousekeepingService + consumer-ids listener).

A closed, idle or failed connection removes its producers and consumers at once; a connection
silent past ``channelExpiredTimeout`` (120 s) is dropped by the periodic scan. Whenever a
consumer group's membership changes, its remaining members get NOTIFY_CONSUMER_IDS_CHANGED
(oneway) so they rebalance now rather than at their next 20 s tick.
"""

from __future__ import annotations

import logging

from rocketmq_py.broker.consumer_manager import ConsumerManager
from rocketmq_py.broker.producer_manager import ProducerManager
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import ConnectionEvents, RemotingConnection
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import NotifyConsumerIdsChangedRequestHeader

log = logging.getLogger("rocketmq.broker")


def notify_consumer_ids_changed(group: str, channels: list[RemotingConnection]) -> None:
    header = NotifyConsumerIdsChangedRequestHeader(consumerGroup=group)
    for channel in channels:
        if not channel.is_open:
            continue
        try:
            channel.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header))
        except RemotingError as exc:
            log.warning("notifyConsumerIdsChanged to %s failed: %s", channel.remote_addr, exc)


class ClientHousekeepingService(ConnectionEvents):
    def __init__(self, producer_manager: ProducerManager, consumer_manager: ConsumerManager) -> None:
        self.producer_manager = producer_manager
        self.consumer_manager = consumer_manager

    def _forget(self, conn: RemotingConnection) -> None:
        self.producer_manager.do_channel_close_event(conn)
        self.consumer_manager.do_channel_close_event(conn)

    def on_close(self, conn: RemotingConnection) -> None:
        self._forget(conn)

    def on_idle(self, conn: RemotingConnection) -> None:
        self._forget(conn)

    def on_exception(self, conn: RemotingConnection, exc: BaseException) -> None:
        self._forget(conn)

    def scan_exception_channels(self) -> None:
        expired = self.producer_manager.scan_not_active_channel() + self.consumer_manager.scan_not_active_channel()
        for channel in expired:
            channel.close("client channel expired")
