"""ACL admin requests on a broker without ACL (Java 4.9.7 with ``aclEnable=false``, its default).

Java's broker has no access validator then, and each of these requests fails on the missing
validator: the updates answer their ``*_FAILED`` code, the two reads answer nothing at all (the
tool waits for its timeout). Ours answers the same codes for the updates and SYSTEM_ERROR for
the reads, each saying why, so ``mqadmin updateAclConfig`` and friends fail at once with a reason
(docs/admin-codes.md). A broker with ``aclEnable=true`` does not register this processor.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from rocketmq_py.acl.acl_exception import AclException
from rocketmq_py.acl.plain_permission_manager import PlainAccessConfig as AccountConfig
from rocketmq_py.acl.plain_permission_manager import PlainPermissionManager
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.protocol.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerClusterAclConfigResponseBody,
    PlainAccessConfig,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    split_list,
)

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker.acl")

ACL_DISABLED_REMARK = "ACL is not enabled on this broker (aclEnable=false)"

_FAILED_CODES = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ResponseCode.SYSTEM_ERROR,
}


class AdminAclDisabledProcessor:
    def refuse(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(_FAILED_CODES[RequestCode(request.code)], ACL_DISABLED_REMARK)


class AdminAclProcessor:
    """The ACL admin requests on a broker with ``aclEnable=true`` (AdminBrokerProcessor's
    updateAndCreateAccessConfig, deleteAccessConfig, updateGlobalWhiteAddrsConfig,
    getBrokerAclConfigVersion, getBrokerClusterAclConfig): each change is checked, written to
    plain_acl.yml with its dataVersion bumped, and in force for the next request."""

    def __init__(self, broker: BrokerController, manager: PlainPermissionManager) -> None:
        self._broker = broker
        self._manager = manager

    def update_and_create_access_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request.decode_header(CreateAccessConfigRequestHeader)
        try:
            config = AccountConfig(
                accessKey=header.accessKey, secretKey=header.secretKey or "",
                whiteRemoteAddress=header.whiteRemoteAddress, admin=header.admin,
                defaultTopicPerm=header.defaultTopicPerm, defaultGroupPerm=header.defaultGroupPerm,
                topicPerms=split_list(header.topicPerms), groupPerms=split_list(header.groupPerms))
            self._manager.update_access_config(config)
        except (AclException, ValueError) as exc:
            log.warning("updateAclConfig of %s from %s refused: %s", header.accessKey, conn.remote_addr, exc)
            return request.response(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
        log.info("ACL account %s updated by %s", header.accessKey, conn.remote_addr)
        return request.response()

    def delete_access_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request.decode_header(DeleteAccessConfigRequestHeader)
        try:
            deleted = self._manager.delete_access_config(header.accessKey)
        except AclException as exc:
            return request.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, str(exc))
        if not deleted:
            return request.response(ResponseCode.DELETE_ACL_CONFIG_FAILED,
                                    f"The accesskey[{header.accessKey}] corresponding to accessConfig has been "
                                    "deleted failed.")
        log.info("ACL account %s deleted by %s", header.accessKey, conn.remote_addr)
        return request.response()

    def update_global_white_addrs_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request.decode_header(UpdateGlobalWhiteAddrsConfigRequestHeader)
        try:
            done = self._manager.update_global_white_addrs(split_list(header.globalWhiteAddrs) or [],
                                                           header.aclFileFullPath)
        except AclException as exc:
            return request.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
        if not done:
            return request.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                    f"The globalWhiteAddresses[{header.globalWhiteAddrs}] has been updated failed.")
        return request.response()

    def get_broker_acl_config_version(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        version = self._manager.state.data_version
        cfg = self._broker.broker_config
        return request.response(header=GetBrokerAclConfigResponseHeader(
            version=version.model_dump_json(), allAclFileVersion=json.dumps({self._manager.path: version.model_dump()}),
            brokerName=cfg.brokerName, brokerAddr=self._broker.broker_addr, clusterName=cfg.brokerClusterName))

    def get_broker_cluster_acl_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        parsed = self._manager.state.file
        body = GetBrokerClusterAclConfigResponseBody(
            globalWhiteAddrs=list(parsed.globalWhiteRemoteAddresses or ()),
            plainAccessConfigs=[PlainAccessConfig.model_validate(a.model_dump()) for a in parsed.accounts or ()])
        return request.response(body=body.encode())
