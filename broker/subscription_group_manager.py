"""Consumer groups known to this broker, ``config/subscriptionGroup.json``.

As in RocketMQ 4.9: a fixed set of tool groups exists from the start; any other group is
created on first use while ``autoCreateSubscriptionGroup`` is on, and groups starting with
``CID_RMQ_SYS_`` always are (the broker's own internal consumers need them).
"""

from __future__ import annotations

import logging
import os
import re

from pydantic import ValidationError

from rocketmq_py.broker.config_manager import ConfigManager
from rocketmq_py.remoting.protocol.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper
from rocketmq_py.remoting.protocol.topic import DataVersion

log = logging.getLogger("rocketmq.broker")

SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
DEFAULT_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                  "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")


# Java's Validators.checkGroup, which its clients apply before they start: a group becomes a
# persisted config, a retry topic and offset keys here, so the broker applies it before creating one.
GROUP_MAX_LENGTH = 255
_GROUP_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def validate_group(group: str) -> str | None:
    """None when the group name is legal, else the reason (answered as a remark)."""
    if not group or not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if not _GROUP_PATTERN.match(group):
        return f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


class SubscriptionGroupManager(ConfigManager):
    def __init__(self, store_path_root: str, auto_create_subscription_group: bool = True) -> None:
        self._path = os.path.join(store_path_root, "config", "subscriptionGroup.json")
        self.auto_create = auto_create_subscription_group
        self.data_version = DataVersion()
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(groupName=g)
                                                          for g in DEFAULT_GROUPS}

    def config_file_path(self) -> str:
        return self._path

    def encode(self) -> str:
        return SubscriptionGroupWrapper(dataVersion=self.data_version,
                                        subscriptionGroupTable=self.table).model_dump_json(exclude_none=True, indent=4)

    def decode(self, text: str) -> None:
        try:
            wrapper = SubscriptionGroupWrapper.decode(text)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        self.table.update(wrapper.subscriptionGroupTable)
        self.data_version.assign(wrapper.dataVersion)

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults if allowed; None when unknown and not creatable
        (auto-creation off, or a name Java's clients would refuse)."""
        config = self.table.get(group)
        if (config is None and (self.auto_create or group.startswith(SYS_GROUP_PREFIX))
                and validate_group(group) is None):
            config = SubscriptionGroupConfig(groupName=group)
            self.table[group] = config
            self.data_version.next_version()
            log.info("auto create a subscription group, %s", group)
            self.persist()
        return config

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        old = self.table.get(config.groupName)
        self.table[config.groupName] = config
        log.info("%s subscription group, %s", "update" if old else "create", config.groupName)
        self.data_version.next_version()
        self.persist()

    def delete_subscription_group_config(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        log.info("delete subscription group OK, %s", group)
        self.data_version.next_version()
        self.persist()
        return True
