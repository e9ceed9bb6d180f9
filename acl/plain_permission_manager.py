"""PlainPermissionManager: the accounts of plain_acl.yml, checked and kept current.

The file (RocketMQ's fields, docs/acl.md) is read at start-up, where a bad file stops the broker
with the reason, and read again whenever its modification time or size changes, polled every
``watch_interval`` seconds (Java's AclFileWatchService polls every 5 s). A reload that fails
keeps the accounts in force and logs the reason: a half-written edit must not lock everyone out
or let everyone in.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import time
from dataclasses import dataclass
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from rocketmq_py.acl.acl_client_rpc_hook import cal_signature
from rocketmq_py.acl.acl_exception import AclException
from rocketmq_py.acl.permission import (
    ADMIN_CODE,
    PUB,
    check_permission,
    is_retry_topic,
    parse_perm,
    parse_resource_perms,
    print_resource,
)
from rocketmq_py.acl.plain_access_resource import PlainAccessResource
from rocketmq_py.acl.remote_address_strategy import AddressMatcher, remote_address_matcher
from rocketmq_py.common.atomic_file import write_file_atomically

log = logging.getLogger("rocketmq.acl")

# AclConstants: keys must be longer than this.
ACCESS_KEY_MIN_LENGTH = 6
SECRET_KEY_MIN_LENGTH = 6
DEFAULT_WATCH_INTERVAL = 5.0
# TopicValidator.RMQ_SYS_TRACE_TOPIC: publishing traces needs no permission on it.
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _scalar_text(value: Any) -> Any:
    """YAML reads ``secretKey: 12345678`` as a number; Java's loader takes it as text."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return value


_Text = Annotated[str, BeforeValidator(_scalar_text)]


class DataVersion(BaseModel):
    model_config = ConfigDict(extra="ignore")
    counter: int = 0
    timestamp: int = 0


class PlainAccessConfig(BaseModel):
    """One entry of ``accounts`` (Java's PlainAccessConfig)."""

    model_config = ConfigDict(extra="forbid")

    accessKey: _Text
    secretKey: _Text
    whiteRemoteAddress: _Text | None = None
    admin: bool = False
    defaultTopicPerm: _Text | None = None
    defaultGroupPerm: _Text | None = None
    topicPerms: list[_Text] | None = None
    groupPerms: list[_Text] | None = None


class PlainAclFile(BaseModel):
    """The whole of plain_acl.yml."""

    model_config = ConfigDict(extra="forbid")

    globalWhiteRemoteAddresses: list[_Text] | None = None
    accounts: list[PlainAccessConfig] | None = None
    dataVersion: list[DataVersion] | None = None


@dataclass
class Account:
    """An account ready for checks (Java's PlainAccessResource built from a config)."""

    access_key: str
    secret_key: str
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    resource_perms: dict[str, int]
    white_address: AddressMatcher


def check_plain_access_config(config: PlainAccessConfig) -> None:
    if len(config.accessKey) <= ACCESS_KEY_MIN_LENGTH or len(config.secretKey) <= SECRET_KEY_MIN_LENGTH:
        raise AclException(f"The accessKey={config.accessKey} and secretKey=*** cannot be null and length "
                           "should longer than 6")


def build_account(config: PlainAccessConfig) -> Account:
    check_plain_access_config(config)
    perms = parse_resource_perms(config.groupPerms, is_topic=False)
    perms.update(parse_resource_perms(config.topicPerms, is_topic=True))
    return Account(config.accessKey, config.secretKey, config.admin, parse_perm(config.defaultTopicPerm),
                   parse_perm(config.defaultGroupPerm), perms, remote_address_matcher(config.whiteRemoteAddress))


@dataclass
class AclState:
    """One reading of the file."""

    accounts: dict[str, Account]
    global_white: list[AddressMatcher]
    data_version: DataVersion
    file: PlainAclFile


def parse_acl_text(text: str, source: str = "plain_acl.yml") -> AclState:
    """The accounts ``text`` declares; AclException naming ``source`` and the fault otherwise."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclException(f"{source} is not valid YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AclException(f"{source} must be a mapping with globalWhiteRemoteAddresses and accounts")
    try:
        parsed = PlainAclFile.model_validate(data)
    except ValidationError as exc:
        faults = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise AclException(f"{source}: {faults}") from None
    accounts: dict[str, Account] = {}
    for i, config in enumerate(parsed.accounts or ()):
        try:
            account = build_account(config)
        except AclException as exc:
            raise AclException(f"{source}: accounts.{i}: {exc}") from None
        if account.access_key in accounts:
            raise AclException(f"{source}: accounts.{i}: accessKey {account.access_key} is defined twice")
        accounts[account.access_key] = account
    try:
        white = [remote_address_matcher(a) for a in parsed.globalWhiteRemoteAddresses or ()]
    except AclException as exc:
        raise AclException(f"{source}: globalWhiteRemoteAddresses: {exc}") from None
    version = parsed.dataVersion[0] if parsed.dataVersion else DataVersion()
    return AclState(accounts, white, version, parsed)


class PlainPermissionManager:
    def __init__(self, path: str, watch_interval: float = DEFAULT_WATCH_INTERVAL) -> None:
        self.path = path
        self.watch_interval = watch_interval
        self._stamp: tuple[int, int, int] | None = None
        self.state = AclState({}, [], DataVersion(), PlainAclFile())

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def load(self) -> None:
        """Read the file now; AclException with the reason if it is missing or bad."""
        stamp = self._file_stamp()
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise AclException(f"cannot read ACL file {self.path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise AclException(f"{self.path} is not UTF-8 text: {exc}") from None
        self.state = parse_acl_text(text, self.path)
        self._stamp = stamp
        log.info("plain ACL loaded from %s: %d accounts, %d global white addresses", self.path,
                 len(self.state.accounts), len(self.state.global_white))

    def reload_if_changed(self) -> bool:
        """Reload when the file changed since the last reading; True when it was reloaded."""
        stamp = self._file_stamp()
        if stamp is None or stamp == self._stamp:
            return False
        try:
            self.load()
        except AclException as exc:
            self._stamp = stamp  # not retried until the file changes again
            log.error("plain ACL not reloaded, the accounts in force stay: %s", exc)
            return False
        return True

    async def watch(self) -> None:
        """Poll the file for changes until cancelled."""
        while True:
            await asyncio.sleep(self.watch_interval)
            try:
                await asyncio.to_thread(self.reload_if_changed)
            except Exception:
                log.exception("plain ACL watch failed")

    # -- changes by the ACL admin requests ---------------------------------------------------

    def _rewrite(self, change: Any) -> None:
        """Apply ``change`` to the file's data as it is on disk now, bump its dataVersion, check
        the result as a start-up would, then write it and put it in force. Nothing is written
        when the result would be refused (AclException with the reason)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise AclException(f"cannot read ACL file {self.path}: {exc}") from None
        if not isinstance(data, dict):
            raise AclException(f"{self.path} must be a mapping with globalWhiteRemoteAddresses and accounts")
        change(data)
        versions = data.get("dataVersion")
        current = versions[0] if isinstance(versions, list) and versions and isinstance(versions[0], dict) else {}
        counter = current.get("counter", 0)
        data["dataVersion"] = [{"counter": (counter if isinstance(counter, int) else 0) + 1,
                                "timestamp": int(time.time() * 1000)}]
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        state = parse_acl_text(text, self.path)
        try:
            write_file_atomically(self.path, text)
        except OSError as exc:
            raise AclException(f"cannot write ACL file {self.path}: {exc.strerror or exc}") from None
        self.state = state
        self._stamp = self._file_stamp()

    def update_access_config(self, config: PlainAccessConfig) -> None:
        """Add the account, or update the one of its accessKey with the fields ``config`` sets
        (PlainPermissionManager.updateAccessConfig)."""
        check_plain_access_config(config)
        parse_resource_perms(config.topicPerms, is_topic=True)
        parse_resource_perms(config.groupPerms, is_topic=False)

        def change(data: dict[str, Any]) -> None:
            accounts = data.get("accounts")
            if not isinstance(accounts, list):
                accounts = data["accounts"] = []
            entry = next((a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == config.accessKey),
                         None)
            if entry is None:
                entry = {}
                accounts.append(entry)
            entry["accessKey"] = config.accessKey
            entry["secretKey"] = config.secretKey
            if config.whiteRemoteAddress is not None:
                entry["whiteRemoteAddress"] = config.whiteRemoteAddress
            entry["admin"] = config.admin
            if config.defaultTopicPerm:
                entry["defaultTopicPerm"] = config.defaultTopicPerm
            if config.defaultGroupPerm:
                entry["defaultGroupPerm"] = config.defaultGroupPerm
            if config.topicPerms is not None:
                entry["topicPerms"] = list(config.topicPerms)
            if config.groupPerms is not None:
                entry["groupPerms"] = list(config.groupPerms)

        self._rewrite(change)

    def delete_access_config(self, access_key: str) -> bool:
        """Remove the account; False when the file has no such account."""
        if not access_key or access_key not in self.state.accounts:
            return False

        def change(data: dict[str, Any]) -> None:
            accounts = data.get("accounts")
            data["accounts"] = [a for a in accounts or () if not (isinstance(a, dict)
                                                                  and str(a.get("accessKey")) == access_key)]

        self._rewrite(change)
        return True

    def update_global_white_addrs(self, addresses: list[str], acl_file: str | None = None) -> bool:
        """Replace globalWhiteRemoteAddresses; False for a file other than this daemon's."""
        if acl_file and os.path.abspath(acl_file) != os.path.abspath(self.path):
            return False
        self._rewrite(lambda data: data.__setitem__("globalWhiteRemoteAddresses", list(addresses)))
        return True

    # -- checks -----------------------------------------------------------------------------

    def validate(self, res: PlainAccessResource) -> None:
        """Return when the request may be served; AclException with Java's message otherwise.
        The order is Java's: global white list, account, the account's white list, signature,
        permissions."""
        state = self.state
        for white in state.global_white:
            if white(res.remote_host):
                return
        if res.access_key is None:
            raise AclException("No accessKey is configured")
        account = state.accounts.get(res.access_key)
        if account is None:
            raise AclException(f"No acl config for {res.access_key}")
        if account.white_address(res.remote_host):
            return
        expected = cal_signature(res.content, account.secret_key)
        if res.signature is None or not hmac.compare_digest(expected, res.signature):
            raise AclException(f"Check signature failed for accessKey={res.access_key}")
        if res.resource_perms.get(RMQ_SYS_TRACE_TOPIC) == PUB:
            return  # publishing traces needs no permission on the trace topic
        check_perm(res, account)


def check_perm(res: PlainAccessResource, account: Account) -> None:
    if res.request_code in ADMIN_CODE and not account.admin:
        raise AclException(f"Need admin permission for request code={res.request_code}, "
                           f"but accessKey={account.access_key} is not")
    if not res.resource_perms or (account.admin and not account.resource_perms):
        return
    for resource, needed in res.resource_perms.items():
        is_group = is_retry_topic(resource)
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group else account.default_topic_perm
        if not check_permission(needed, owned):
            raise AclException(f"No default permission for {print_resource(resource, is_group)}")
