"""SubscriptionGroupConfig: a consumer group's broker-side settings (docs/protocol.md#admin-requests)."""

from __future__ import annotations

from pydantic import Field

from rocketmq_py.remoting.protocol.json_body import JsonBody
from rocketmq_py.remoting.protocol.topic import DataVersion

# MixAll.MASTER_ID: slaves have ids > 0.
MASTER_ID = 0


class SubscriptionGroupConfig(JsonBody):
    brokerId: int = MASTER_ID
    consumeBroadcastEnable: bool = True
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    groupName: str
    notifyConsumerIdsChangedEnable: bool = True
    retryMaxTimes: int = 16
    retryQueueNums: int = 1
    whichBrokerWhenConsumeSlowly: int = 1


class SubscriptionGroupWrapper(JsonBody):
    """subscriptionGroup.json and the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""

    dataVersion: DataVersion = Field(default_factory=DataVersion)
    subscriptionGroupTable: dict[str, SubscriptionGroupConfig] = Field(default_factory=dict)
