"""PlainAccessValidator: the check a daemon's processor table runs before every request.

With ``aclEnable=true`` each request is parsed (plain_access_resource.parse) and validated
against the accounts (PlainPermissionManager) before any processor sees it. A refusal is
answered NO_PERMISSION with the reason Java gives, the processor never runs (so nothing
changes), and a WARN line names the address, the account and the request code (rate-limited
per code and address, as every refusal is: common/refusal_log.py).

RocketMQ 4.9.7 surfaces the same AclException as SYSTEM_ERROR with the exception's text; the
issue this project follows asks for NO_PERMISSION (16), which RocketMQ's clients also treat as
a refusal not worth retrying (docs/acl.md).
"""

from __future__ import annotations

import asyncio
import logging
import os

from rocketmq_py.acl.acl_exception import AclException
from rocketmq_py.acl.plain_access_resource import parse
from rocketmq_py.acl.plain_permission_manager import PlainPermissionManager
from rocketmq_py.acl.session_credentials import ACCESS_KEY
from rocketmq_py.common.refusal_log import RefusalLog
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.server import RemotingServer

log = logging.getLogger("rocketmq.acl")

# How Java's clients print the refusal: the exception's class, then its message.
REMARK_PREFIX = "org.apache.rocketmq.acl.common.AclException: "


def acl_file_path(rocketmq_home: str, plain_file: str) -> str:
    """Where plain_acl.yml is: ``plain_file`` under ``rocketmq_home`` unless absolute, as Java
    resolves its ``rocketmq.acl.plain.file`` property (default conf/plain_acl.yml)."""
    return plain_file if os.path.isabs(plain_file) else os.path.join(rocketmq_home, plain_file)


class PlainAccessValidator:
    def __init__(self, manager: PlainPermissionManager) -> None:
        self.manager = manager
        self.refusals = RefusalLog(log)
        self._watch: asyncio.Task[None] | None = None

    @classmethod
    def from_config(cls, rocketmq_home: str, plain_file: str, watch_interval_ms: int) -> PlainAccessValidator:
        """A validator over the accounts of the daemon's file, read now (AclException if bad)."""
        manager = PlainPermissionManager(acl_file_path(rocketmq_home, plain_file), watch_interval_ms / 1000)
        manager.load()
        return cls(manager)

    def install(self, *servers: RemotingServer) -> None:
        """Check every request of ``servers`` from now on: the validator is their RPC hook, as
        Java's BrokerController.initialAcl registers one whose doBeforeRequest validates."""
        for server in servers:
            server.processors.register_rpc_hook(self)

    def start(self) -> None:
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self.manager.watch())

    def shutdown(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> RemotingCommand | None:
        """None when ``request`` may go to its processor; else the refusal to answer with."""
        try:
            self.manager.validate(parse(request, remote_addr))
        except AclException as exc:
            reason = str(exc)
        except Exception as exc:  # a fault of the check itself: refuse rather than let through
            log.exception("ACL check of request code %s from %s failed", request.code, remote_addr)
            reason = f"ACL check failed: {type(exc).__name__}: {exc}"
        else:
            return None
        account = (request.ext_fields or {}).get(ACCESS_KEY) or "(none)"
        self.refusals.refused(remote_addr, request.code, f"ACL: accessKey={account}: {reason}")
        return request.response(ResponseCode.NO_PERMISSION, REMARK_PREFIX + reason)

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        """Nothing: the check is all before the processor."""
