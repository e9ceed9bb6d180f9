"""Consumer groups: members, subscriptions, and the rebalance trigger (Java's ConsumerManager).

When a group's membership or subscriptions change, every member still connected is told with
NOTIFY_CONSUMER_IDS_CHANGED so it rebalances at once instead of at its next 20 s tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketmq_py.broker.client_channel import CHANNEL_EXPIRED_TIMEOUT, ClientChannelInfo
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData

log = logging.getLogger("rocketmq.broker")

# (group, channels still in the group) -> None
ConsumerIdsChangeListener = Callable[[str, list[RemotingConnection]], None]


@dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    channel_info_table: dict[RemotingConnection, ClientChannelInfo] = field(default_factory=dict)
    last_update: float = field(default_factory=time.monotonic)

    def all_client_ids(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def all_channels(self) -> list[RemotingConnection]:
        return list(self.channel_info_table)

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        return next((i for i in self.channel_info_table.values() if i.client_id == client_id), None)

    def update_channel(self, info: ClientChannelInfo, consume_type: ConsumeType, message_model: MessageModel,
                       consume_from_where: ConsumeFromWhere) -> bool:
        """True when this is a new member of the group."""
        self.consume_type, self.message_model, self.consume_from_where = consume_type, message_model, consume_from_where
        known = self.channel_info_table.get(info.channel)
        if known is None:
            self.channel_info_table[info.channel] = info
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group_name, consume_type,
                     message_model, info.client_addr)
            return True
        if known.client_id != info.client_id:
            log.error("[BUG] consumer channel exist in broker, but clientId not equal. GROUP: %s OLD: %s NEW: %s",
                      self.group_name, known.client_id, info.client_id)
            self.channel_info_table[info.channel] = info
            return True
        known.last_update = time.monotonic()
        self.last_update = known.last_update
        return False

    def update_subscription(self, sub_list: list[SubscriptionData]) -> bool:
        """Replace the subscriptions; True when topics were added or removed (a newer version of an
        existing topic's expression replaces it without counting as a membership change)."""
        changed = False
        wanted = {s.topic for s in sub_list}
        for sub in sub_list:
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                changed = True
                log.info("subscription changed, add new topic, group: %s %s", self.group_name, sub.topic)
            elif sub.subVersion > old.subVersion:
                self.subscription_table[sub.topic] = sub
        for topic in [t for t in self.subscription_table if t not in wanted]:
            del self.subscription_table[topic]
            changed = True
            log.warning("subscription changed, group: %s remove topic %s", self.group_name, topic)
        self.last_update = time.monotonic()
        return changed

    def unregister_channel(self, channel: RemotingConnection) -> bool:
        return self.channel_info_table.pop(channel, None) is not None


class ConsumerManager:
    def __init__(self, on_ids_changed: ConsumerIdsChangeListener | None = None,
                 channel_expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.on_ids_changed = on_ids_changed
        self.channel_expired_timeout = channel_expired_timeout

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        return info.subscription_table.get(topic) if info else None

    def has_stale_offsets(self, group: str, topic: str) -> bool:
        """Whether ``group`` is online with subscriptions, none of them to ``topic``: its offsets
        there are left over, and Java's consume stats leave such topics out
        (findSubscriptionData is null while findSubscriptionDataCount is above 0)."""
        info = self.consumer_table.get(group)
        return info is not None and bool(info.subscription_table) and topic not in info.subscription_table

    def register_consumer(self, group: str, info: ClientChannelInfo, consume_type: ConsumeType,
                          message_model: MessageModel, consume_from_where: ConsumeFromWhere,
                          sub_list: list[SubscriptionData], notify: bool) -> bool:
        """Add or refresh a member; True (and members notified, if ``notify``) on any change."""
        group_info = self.consumer_table.get(group)
        if group_info is None:
            group_info = self.consumer_table[group] = ConsumerGroupInfo(group, consume_type, message_model,
                                                                         consume_from_where)
        members_changed = group_info.update_channel(info, consume_type, message_model, consume_from_where)
        subs_changed = group_info.update_subscription(sub_list)
        if (members_changed or subs_changed) and notify:
            self._notify(group, group_info)
        return members_changed or subs_changed

    def unregister_consumer(self, group: str, channel: RemotingConnection, notify: bool) -> None:
        group_info = self.consumer_table.get(group)
        if group_info is None or not group_info.unregister_channel(channel):
            return
        if not group_info.channel_info_table:
            del self.consumer_table[group]
            log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
        elif notify:
            self._notify(group, group_info)

    def do_channel_close_event(self, channel: RemotingConnection) -> None:
        for group, group_info in list(self.consumer_table.items()):
            if group_info.unregister_channel(channel):
                if not group_info.channel_info_table:
                    del self.consumer_table[group]
                    log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
                else:
                    self._notify(group, group_info)

    def scan_not_active_channel(self, now: float | None = None) -> list[RemotingConnection]:
        now = time.monotonic() if now is None else now
        expired = {info.channel for g in self.consumer_table.values() for info in g.channel_info_table.values()
                   if now - info.last_update > self.channel_expired_timeout}
        for channel in expired:
            log.warning("SCAN: remove expired channel from ConsumerManager consumerTable. channel=%s",
                        channel.remote_addr)
            self.do_channel_close_event(channel)
        return list(expired)

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}

    def _notify(self, group: str, group_info: ConsumerGroupInfo) -> None:
        if self.on_ids_changed is not None:
            self.on_ids_changed(group, group_info.all_channels())
