"""Plain ACL without sockets: plain_acl.yml checked, addresses matched, requests parsed and
validated with RocketMQ 4.9.7's rules and messages."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.acl.acl_client_rpc_hook import sign_request
from rocketmq_py.acl.acl_exception import AclException
from rocketmq_py.acl.permission import ANY, DENY, PUB, SUB, check_permission
from rocketmq_py.acl.plain_access_resource import parse
from rocketmq_py.acl.plain_access_validator import REMARK_PREFIX, PlainAccessValidator
from rocketmq_py.acl.plain_permission_manager import PlainPermissionManager, parse_acl_text
from rocketmq_py.acl.remote_address_strategy import remote_address_matcher
from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.conf import conf_path
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand

ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: client-ak
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - accessKey: admin-ak
    secretKey: admin-secret
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
CLIENT = SessionCredentials("client-ak", "12345678")
ADMIN = SessionCredentials("admin-ak", "admin-secret")


def _validator(tmp_path: Path, text: str = ACL) -> PlainAccessValidator:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)
    manager = PlainPermissionManager(str(path))
    manager.load()
    return PlainAccessValidator(manager)


def _req(code: int, ext: dict[str, str] | None = None, body: bytes | None = None,
         creds: SessionCredentials | None = None) -> RemotingCommand:
    request = RemotingCommand.request(code, dict(ext) if ext is not None else None, body)
    if creds is not None:
        sign_request(request, creds)
    return request


def _refusal(v: PlainAccessValidator, request: RemotingCommand, addr: str = "127.0.0.1:50000") -> str | None:
    answer = v.do_before_request(addr, request)
    if answer is None:
        return None
    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None and answer.remark.startswith(REMARK_PREFIX)
    return answer.remark[len(REMARK_PREFIX):]


def test_shipped_file_loads() -> None:
    state = parse_acl_text(Path(conf_path("plain_acl.yml")).read_text())
    assert set(state.accounts) == {"RocketMQ", "rocketmq2"}
    assert state.accounts["RocketMQ"].secret_key == "12345678"  # a YAML number, read as text
    assert state.accounts["rocketmq2"].admin


def test_check_permission_table() -> None:
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(SUB, DENY | SUB)
    assert check_permission(ANY, PUB) and not check_permission(ANY, DENY)


@pytest.mark.parametrize(("text", "fault"), [
    ("accounts: 3", "accounts"),
    ("- a\n- b", "must be a mapping"),
    ("accounts: [{accessKey: short, secretKey: 12345678}]", "length should longer than 6"),
    ("accounts: [{accessKey: long-enough, secretKey: 123}]", "length should longer than 6"),
    ("accounts: [{accessKey: long-enough}]", "secretKey"),
    ("accounts: [{accessKey: long-enough, secretKey: 12345678, topicPerms: [topicA]}]", "Res=Perm"),
    ("accounts: [{accessKey: long-enough, secretKey: 12345678, topicPerms: [topicA=ALL]}]",
     "The expected permissions"),
    ("accounts: [{accessKey: long-enough, secretKey: 12345678, secretkey: x}]", "secretkey"),
    ("accounts: [{accessKey: long-enough, secretKey: 12345678, whiteRemoteAddress: 300.1.1.x}]", "Netaddress"),
    ("globalWhiteRemoteAddresses: [10.10.*.1]", "Netaddress"),
    ("accounts: [{accessKey: long-enough, secretKey: 12345678}, {accessKey: long-enough, secretKey: 87654321}]",
     "defined twice"),
    ("accounts: [", "not valid YAML"),
])
def test_bad_files_refused_with_reason(text: str, fault: str) -> None:
    with pytest.raises(AclException, match=fault):
        parse_acl_text(text, "f.yml")


@given(st.text(max_size=200))
def test_any_text_is_loaded_or_refused_cleanly(text: str) -> None:
    try:
        parse_acl_text(text)
    except AclException:
        pass


@pytest.mark.parametrize(("pattern", "yes", "no"), [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["127.0.0.1"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("10.10.103.*", ["10.10.103.0", "10.10.103.255"], ["10.10.104.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.2.5"]),
    ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
    ("10.0.0.1,10.0.0.9", ["10.0.0.9"], ["10.0.0.2"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
    ("1050:0:0:0:5:600:300c:*", ["1050::5:600:300c:326b"], ["1050::5:600:300d:1"]),
])
def test_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    match = remote_address_matcher(pattern)
    assert all(match(a) for a in yes) and not any(match(a) for a in no)


def test_resources_as_java_parses_them() -> None:
    send = parse(_req(RequestCode.SEND_MESSAGE_V2, {"a": "g1", "b": "t1"}), "1.2.3.4:5")
    assert send.resource_perms == {"t1": PUB} and send.remote_host == "1.2.3.4"
    retry = parse(_req(RequestCode.SEND_MESSAGE_V2, {"a": "g1", "b": "%RETRY%g1"}), "[::1]:5")
    assert retry.resource_perms == {"%RETRY%g1": SUB} and retry.remote_host == "::1"
    pull = parse(_req(RequestCode.PULL_MESSAGE, {"topic": "t", "consumerGroup": "g"}), "h:1")
    assert pull.resource_perms == {"t": SUB, "%RETRY%g": SUB}
    body = json.dumps({"clientID": "c", "consumerDataSet": [
        {"groupName": "g", "subscriptionDataSet": [{"topic": "t", "subString": "*"}]}]}).encode()
    assert parse(_req(RequestCode.HEART_BEAT, {}, body), "h:1").resource_perms == {"%RETRY%g": SUB, "t": SUB}
    offset = parse(_req(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "t", "queueId": "0",
                                                           "commitOffset": "1"}), "h:1")
    assert offset.resource_perms == {"%RETRY%g": SUB, "t": SUB}
    with pytest.raises(AclException):
        parse(_req(RequestCode.HEART_BEAT, {}, b"{not json"), "h:1")
    with pytest.raises(AclException):
        parse(_req(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}), "h:1")


def test_validation_order_and_messages(tmp_path: Path) -> None:
    v = _validator(tmp_path)
    send_b = {"a": "groupB", "b": "topicB"}
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, send_b)) == "No accessKey is configured"
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, send_b, creds=SessionCredentials("nobody-ak", "x"))) \
        == "No acl config for nobody-ak"
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, send_b, creds=SessionCredentials("client-ak", "wrong"))) \
        == "Check signature failed for accessKey=client-ak"
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, send_b, creds=CLIENT)) is None
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "topicC"}, creds=CLIENT)) \
        == "No default permission for topic:topicC"
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "other"}, creds=CLIENT)) \
        == "No default permission for topic:other"
    assert _refusal(v, _req(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupA"},
                            creds=CLIENT)) == "No default permission for group:groupA"
    assert _refusal(v, _req(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupZ"},
                            creds=CLIENT)) is None  # defaultGroupPerm SUB
    # a tampered request: signed, then a field changed in flight
    tampered = _req(RequestCode.SEND_MESSAGE_V2, send_b, b"body", creds=CLIENT)
    tampered.body = b"other"
    assert _refusal(v, tampered) == "Check signature failed for accessKey=client-ak"
    # admin codes
    assert _refusal(v, _req(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, creds=CLIENT)) == \
        f"Need admin permission for request code={int(RequestCode.UPDATE_AND_CREATE_TOPIC)}, " \
        "but accessKey=client-ak is not"
    assert _refusal(v, _req(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, creds=ADMIN)) is None
    # white lists: global, then the account's own (no signature needed there)
    assert _refusal(v, _req(RequestCode.UPDATE_AND_CREATE_TOPIC, None), "10.10.103.7:1") is None
    assert _refusal(v, _req(RequestCode.UPDATE_AND_CREATE_TOPIC, {"AccessKey": "admin-ak"}), "192.168.1.9:1") is None
    assert _refusal(v, _req(RequestCode.UPDATE_AND_CREATE_TOPIC, {"AccessKey": "admin-ak"}), "192.168.2.9:1") \
        == "Check signature failed for accessKey=admin-ak"
    # traces: PUB on the trace topic needs no permission
    assert _refusal(v, _req(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "RMQ_SYS_TRACE_TOPIC"}, creds=CLIENT)) is None


def test_reload_keeps_accounts_when_the_new_file_is_bad(tmp_path: Path) -> None:
    v = _validator(tmp_path)
    path = tmp_path / "plain_acl.yml"
    request = _req(RequestCode.GET_BROKER_RUNTIME_INFO, {}, creds=CLIENT)
    assert _refusal(v, request) is None
    path.write_text("accounts: [{accessKey: x}]\n# a different size")
    assert not v.manager.reload_if_changed()
    assert _refusal(v, _req(RequestCode.GET_BROKER_RUNTIME_INFO, {}, creds=CLIENT)) is None
    path.write_text(ACL.replace("client-ak", "client-bk"))
    os.utime(path, ns=(1, 1))
    assert v.manager.reload_if_changed()
    assert _refusal(v, _req(RequestCode.GET_BROKER_RUNTIME_INFO, {}, creds=CLIENT)) == "No acl config for client-ak"
