"""Producer groups and their live connections, from HEART_BEAT (Java's ProducerManager).

The broker needs them to send CHECK_TRANSACTION_STATE to a live producer of a group, and for
GET_PRODUCER_CONNECTION_LIST.
"""

from __future__ import annotations

import itertools
import logging
import time

from rocketmq_py.broker.client_channel import CHANNEL_EXPIRED_TIMEOUT, ClientChannelInfo
from rocketmq_py.remoting.connection import RemotingConnection

log = logging.getLogger("rocketmq.broker")


class ProducerManager:
    def __init__(self, channel_expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT) -> None:
        self.channel_expired_timeout = channel_expired_timeout
        self.group_channel_table: dict[str, dict[RemotingConnection, ClientChannelInfo]] = {}
        self._rr = itertools.count()

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.setdefault(group, {})
        known = channels.get(info.channel)
        if known is None:
            channels[info.channel] = info
            log.info("new producer connected, group: %s channel: %s", group, info.client_addr)
        else:
            known.last_update = time.monotonic()

    def unregister_producer(self, group: str, channel: RemotingConnection) -> None:
        channels = self.group_channel_table.get(group)
        if channels and channels.pop(channel, None) is not None:
            log.info("unregister a producer %s from groupChannelTable %s", group, channel.remote_addr)
            if not channels:
                del self.group_channel_table[group]

    def do_channel_close_event(self, channel: RemotingConnection) -> None:
        for group in list(self.group_channel_table):
            self.unregister_producer(group, channel)

    def scan_not_active_channel(self, now: float | None = None) -> list[RemotingConnection]:
        """Forget producers silent past the expiry; returns their channels for the caller to close."""
        now = time.monotonic() if now is None else now
        expired = [info.channel for channels in self.group_channel_table.values() for info in channels.values()
                   if now - info.last_update > self.channel_expired_timeout]
        for channel in expired:
            log.warning("producer channel %s expired, removed", channel.remote_addr)
            self.do_channel_close_event(channel)
        return expired

    def get_available_channel(self, group: str) -> RemotingConnection | None:
        """A live connection of the group, rotating among them (transaction check-back)."""
        live = [c for c in self.group_channel_table.get(group, {}) if c.is_open]
        return live[next(self._rr) % len(live)] if live else None

    def find_channel(self, client_id: str) -> RemotingConnection | None:
        for channels in self.group_channel_table.values():
            for channel, info in channels.items():
                if info.client_id == client_id:
                    return channel
        return None
