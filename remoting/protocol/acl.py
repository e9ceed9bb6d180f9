"""The ACL admin requests' headers and bodies (RocketMQ 4.9.7's names, docs/acl.md).

List fields travel as one comma-separated string in headers (``topicPerms=topicA=PUB,topicB=SUB``),
as Java's UtilAll.split reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from rocketmq_py.remoting.header import CommandHeader
from rocketmq_py.remoting.protocol.json_body import JsonBody


def split_list(text: str | None) -> list[str] | None:
    """UtilAll.split(text, ","): None stays None, blanks are dropped."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG."""

    accessKey: str
    secretKey: str | None = None
    whiteRemoteAddress: str | None = None
    admin: bool = False
    defaultTopicPerm: str | None = None
    defaultGroupPerm: str | None = None
    topicPerms: str | None = None
    groupPerms: str | None = None


@dataclass
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG."""

    accessKey: str


@dataclass
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG."""

    globalWhiteAddrs: str
    aclFileFullPath: str | None = None


@dataclass
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """GET_BROKER_CLUSTER_ACL_INFO's answer: the file's DataVersion as JSON, and every file's."""

    version: str
    allAclFileVersion: str | None = None
    brokerName: str | None = None
    brokerAddr: str | None = None
    clusterName: str | None = None


class PlainAccessConfig(JsonBody):
    """One account as GET_BROKER_CLUSTER_ACL_CONFIG lists it."""

    accessKey: str | None = None
    admin: bool = False
    defaultGroupPerm: str | None = None
    defaultTopicPerm: str | None = None
    groupPerms: list[str] | None = None
    secretKey: str | None = None
    topicPerms: list[str] | None = None
    whiteRemoteAddress: str | None = None


class GetBrokerClusterAclConfigResponseBody(JsonBody):
    globalWhiteAddrs: list[str] = Field(default_factory=list)
    plainAccessConfigs: list[PlainAccessConfig] = Field(default_factory=list)
