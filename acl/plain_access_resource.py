"""What a request asks for: its account, signature, content and needed permissions.

The mapping from request code to resources is PlainAccessValidator.parse of RocketMQ 4.9.7,
code by code (docs/acl.md lists it): sends need PUB on their topic (a send to a retry topic SUB
on the group), pulls SUB on the topic and the group, heartbeats SUB on every consumer group and
subscribed topic, offsets and consumer lists SUB on the group. Every other request needs an
account (or a white-listed address) and nothing more, except the admin-only codes
(permission.ADMIN_CODE).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketmq_py.acl.acl_client_rpc_hook import UNIQUE_MSG_QUERY_FLAG, combine_request_content
from rocketmq_py.acl.acl_exception import AclException
from rocketmq_py.acl.permission import PUB, SUB, is_retry_topic, retry_topic
from rocketmq_py.acl.session_credentials import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE
from rocketmq_py.remoting.codes import RequestCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.broker import SendMessageRequestHeaderV2, UpdateConsumerOffsetRequestHeader
from rocketmq_py.remoting.protocol.heartbeat import (
    GetConsumerListByGroupRequestHeader,
    HeartbeatData,
    UnregisterClientRequestHeader,
)

_V2_TOPIC = SendMessageRequestHeaderV2.wire_key("topic")
_V2_GROUP = SendMessageRequestHeaderV2.wire_key("producerGroup")
_CONTENT_SKIP = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))


@dataclass
class PlainAccessResource:
    """One request as the validator sees it."""

    remote_host: str
    request_code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    content: bytes = b""
    # resource (topic or %RETRY%group) -> the permission bits the request needs on it
    resource_perms: dict[str, int] = field(default_factory=dict)

    def add(self, resource: str | None, perm: int) -> None:
        if resource is not None:
            self.resource_perms[resource] = perm


def remote_host(remote_addr: str) -> str:
    """The address part of ``host:port`` (``[v6]:port`` too), as Java strips the port."""
    host, sep, _ = remote_addr.rpartition(":")
    return (host if sep else remote_addr).strip("[]")


def _group(group: str | None) -> str | None:
    return None if group is None else retry_topic(group)


def parse(request: RemotingCommand, remote_addr: str) -> PlainAccessResource:
    """The request's account, signature, content and needed permissions; AclException when a
    header or body the mapping reads cannot be read."""
    res = PlainAccessResource(remote_host(remote_addr), request.code)
    ext = request.ext_fields
    if ext is None:
        return res  # only a white-listed address can pass
    res.access_key = ext.get(ACCESS_KEY)
    res.signature = ext.get(SIGNATURE)
    res.security_token = ext.get(SECURITY_TOKEN)
    try:
        _add_resources(res, request, ext)
    except AclException:
        raise
    except Exception as exc:  # a header or body the mapping cannot read
        raise AclException(str(exc) or type(exc).__name__) from None
    res.content = combine_request_content(ext, request.body, skip=_CONTENT_SKIP)
    return res


def _send(res: PlainAccessResource, topic: str | None, group: str | None) -> None:
    if is_retry_topic(topic):
        res.add(_group(group), SUB)
    else:
        res.add(topic, PUB)


def _add_resources(res: PlainAccessResource, request: RemotingCommand, ext: dict[str, str]) -> None:
    code = request.code
    if code == RequestCode.SEND_MESSAGE:
        _send(res, ext.get("topic"), ext.get("group"))
    elif code == RequestCode.SEND_MESSAGE_V2:
        _send(res, ext.get(_V2_TOPIC), ext.get(_V2_GROUP))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        res.add(_group(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        res.add(ext.get("topic"), SUB)
        res.add(_group(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        res.add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        heartbeat = HeartbeatData.decode(request.body)
        for consumer in heartbeat.consumerDataSet:
            res.add(_group(consumer.groupName), SUB)
            for subscription in consumer.subscriptionDataSet:
                res.add(subscription.topic, SUB)
    elif code == RequestCode.UNREGISTER_CLIENT:
        res.add(_group(request.decode_header(UnregisterClientRequestHeader).consumerGroup), SUB)
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        res.add(_group(request.decode_header(GetConsumerListByGroupRequestHeader).consumerGroup), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        header = request.decode_header(UpdateConsumerOffsetRequestHeader)
        res.add(_group(header.consumerGroup), SUB)
        res.add(header.topic, SUB)
