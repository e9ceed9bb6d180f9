"""Java properties files onto pydantic configs, as RocketMQ's startups read broker.conf."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from rocketmq_py.common.properties import ConfigError, apply_properties, format_properties, parse_properties


class NetConfig(BaseModel):
    listenPort: int = 10911
    serverChannelMaxIdleTimeSeconds: int = 120


class BrokerCfg(BaseModel):
    brokerName: str = "broker-a"
    autoCreateTopicEnable: bool = True
    namesrvAddr: str | None = None


def test_parse_java_properties_forms() -> None:
    text = """# comment
! also a comment
brokerName = broker-b
listenPort:10921
namesrvAddr 127.0.0.1:9876;127.0.0.1:9877
long=first \\
    second
escaped=a\\tb\\u0041
empty=
"""
    props = parse_properties(text)
    assert props == {"brokerName": "broker-b", "listenPort": "10921",
                     "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877", "long": "first second",
                     "escaped": "a\tbA", "empty": ""}


def test_apply_splits_keys_across_models_and_reports_unknown() -> None:
    props = {"brokerName": "b1", "listenPort": "10921", "autoCreateTopicEnable": "false", "bogusKey": "1"}
    (net, broker), unknown = apply_properties([NetConfig, BrokerCfg], props)
    assert isinstance(net, NetConfig) and net.listenPort == 10921
    assert isinstance(broker, BrokerCfg) and broker.brokerName == "b1" and broker.autoCreateTopicEnable is False
    assert unknown == {"bogusKey"}


def test_bad_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match="listenPort='abc'"):
        apply_properties([NetConfig], {"listenPort": "abc"})


def test_format_round_trips() -> None:
    (broker,), _ = apply_properties([BrokerCfg], {"autoCreateTopicEnable": "false"})
    text = format_properties(broker)
    assert "autoCreateTopicEnable=false" in text
    (again,), _ = apply_properties([BrokerCfg], parse_properties(text))
    assert again == broker
