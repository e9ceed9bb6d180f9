"""KV config persistence and the mqnamesrv configuration path (-c, -o, flags, -p)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rocketmq_py.common.properties import ConfigError
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rocketmq_py.namesrv.startup import build_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_kv_config_persists_and_reloads(tmp_path: str) -> None:
    path = os.path.join(str(tmp_path), "namesrv", "kvConfig.json")
    kv = KVConfigManager(path)
    kv.load()  # no file yet: an empty table, not an error
    assert kv.config_table == {}
    kv.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicA", "broker-a:4")
    kv.put_kv_config("NS", "k", "v1")
    kv.put_kv_config("NS", "k", "v2")
    assert kv.delete_kv_config("NS", "missing") is False
    with open(path, encoding="utf-8") as f:  # Java's KVConfigSerializeWrapper shape
        assert json.load(f) == {"configTable": {"ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4"}, "NS": {"k": "v2"}}}

    again = KVConfigManager(path)
    again.load()
    assert again.get_kv_config("NS", "k") == "v2"
    assert json.loads(again.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG) or b"") == {
        "table": {"TopicA": "broker-a:4"}}
    assert again.delete_kv_config("NS", "k") is True
    assert again.get_kv_list_by_namespace("NS") is None, "an emptied namespace is gone"


def test_kv_config_falls_back_to_backup_then_refuses(tmp_path: str) -> None:
    path = os.path.join(str(tmp_path), "kvConfig.json")
    kv = KVConfigManager(path)
    kv.put_kv_config("NS", "a", "1")
    kv.put_kv_config("NS", "b", "2")  # the previous file is now kvConfig.json.bak
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"configTable": {"NS": ')  # torn write
    restored = KVConfigManager(path)
    restored.load()
    assert restored.config_table == {"NS": {"a": "1"}}
    with open(path + ".bak", "w", encoding="utf-8") as f:
        f.write("[1, 2]")
    with pytest.raises(ValueError):
        KVConfigManager(path).load()


def test_build_config_layers_file_options_and_flags(tmp_path: str) -> None:
    conf = os.path.join(str(tmp_path), "namesrv.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write("listenPort=9100\norderMessageEnable=true\nbrokerChannelExpiredTime=1500\nnoSuchKey=1\n")
    ns, server = build_config(conf, ["scanNotActiveBrokerInterval=200", "listenPort=9200"], 9300, "127.0.0.1",
                              str(tmp_path))
    assert server.listenPort == 9300, "a named flag beats -o, which beats the file"
    assert server.bindAddress == "127.0.0.1"
    assert (ns.orderMessageEnable, ns.brokerChannelExpiredTime, ns.scanNotActiveBrokerInterval) == (True, 1500, 200)
    assert ns.kvConfigPath == os.path.join(str(tmp_path), "namesrv", "kvConfig.json")
    default_ns, default_server = build_config(None, [], None, None, None)
    assert default_server.listenPort == 9876 and default_ns.brokerChannelExpiredTime == 120000
    assert default_ns.scanNotActiveBrokerInterval == 10000
    with pytest.raises(ConfigError):
        build_config(None, ["listenPort"], None, None, None)
    with pytest.raises(ConfigError):
        build_config(None, ["listenPort=notanumber"], None, None, None)


def test_defaults_are_rocketmqs() -> None:
    c = NamesrvConfig()
    assert c.kvConfigPath.endswith(os.path.join("namesrv", "kvConfig.json"))
    assert c.configStorePath.endswith(os.path.join("namesrv", "namesrv.properties"))
    assert (c.productEnvName, c.clusterTest, c.orderMessageEnable) == ("center", False, False)


LAUNCHERS = [[sys.executable, "-m", "rocketmq_py.namesrv.startup"], [os.path.join(ROOT, "bin", "mqnamesrv")]]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_print_config_and_exit(tmp_path: str, launcher: list[str]) -> None:
    conf = os.path.join(str(tmp_path), "namesrv.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write("listenPort=9555\n")
    out = subprocess.run([*launcher, "-c", conf, "-o", "orderMessageEnable=true", "-p"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    props = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert props["listenPort"] == "9555" and props["orderMessageEnable"] == "true"
    assert props["brokerChannelExpiredTime"] == "120000"


def test_bad_option_exits_with_usage_error(tmp_path: str) -> None:
    out = subprocess.run([sys.executable, "-m", "rocketmq_py.namesrv.startup", "-o", "listenPort=abc", "-p"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 2 and "listenPort" in out.stderr


def test_unreadable_kv_config_refuses_to_start(tmp_path: str) -> None:
    # Serving with an empty table would silently drop ORDER_TOPIC_CONFIG; the KV file is read
    # before the listener opens, so this needs no socket.
    os.makedirs(os.path.join(str(tmp_path), "namesrv"))
    for name in ("kvConfig.json", "kvConfig.json.bak"):
        with open(os.path.join(str(tmp_path), "namesrv", name), "w", encoding="utf-8") as f:
            f.write("{not json")
    out = subprocess.run([sys.executable, "-m", "rocketmq_py.namesrv.startup", "--home", str(tmp_path), "-l", "0",
                          "--bind-address", "127.0.0.1"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 1 and "cannot start" in out.stderr and "kvConfig.json" in out.stderr
