"""ACL admin requests on a broker without ACL (Java 4.9.7 with ``aclEnable=false``, its default).

Java's broker has no access validator then, and each of these requests fails on the missing
validator: the updates answer their ``*_FAILED`` code, the two reads answer nothing at all (the
tool waits for its timeout). Ours answers the same codes for the updates and SYSTEM_ERROR for
the reads, each saying why, so ``mqadmin updateAclConfig`` and friends fail at once with a reason
(docs/admin-codes.md). A broker with ``aclEnable=true`` does not register this processor.
"""

from __future__ import annotations

from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.server import RemotingServer

ACL_DISABLED_REMARK = "ACL is not enabled on this broker (aclEnable=false)"

_FAILED_CODES = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ResponseCode.SYSTEM_ERROR,
}


class AdminAclDisabledProcessor:
    def register(self, server: RemotingServer) -> None:
        for code in _FAILED_CODES:
            server.register_processor(code, self.refuse)

    def refuse(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(_FAILED_CODES[RequestCode(request.code)], ACL_DISABLED_REMARK)
