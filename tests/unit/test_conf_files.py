"""Every shipped conf file loads with only known keys, so a typo there never goes unnoticed."""

from __future__ import annotations

import glob
import os

import pytest

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.common.properties import apply_properties, read_properties_file
from rocketmq_py.namesrv.config import NamesrvConfig
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig

CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "conf")


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(CONF, "**", "broker*.*"), recursive=True)))
def test_broker_conf_files(path: str) -> None:
    (broker, server, _), unknown = apply_properties([BrokerConfig, NettyServerConfig, MessageStoreConfig],
                                                    read_properties_file(path))
    assert not unknown, f"{path}: unknown keys {unknown}"
    assert isinstance(broker, BrokerConfig) and broker.brokerName.startswith("broker-")
    assert isinstance(server, NettyServerConfig) and server.listenPort > 0


def test_namesrv_conf_file() -> None:
    (_, server), unknown = apply_properties([NamesrvConfig, NettyServerConfig],
                                            read_properties_file(os.path.join(CONF, "namesrv.conf")))
    assert not unknown and isinstance(server, NettyServerConfig) and server.listenPort == 9876


def test_two_masters_do_not_collide() -> None:
    confs = [read_properties_file(p) for p in sorted(glob.glob(os.path.join(CONF, "2m-noslave", "*.properties")))]
    assert len(confs) == 2
    assert len({c["brokerName"] for c in confs}) == 2 and len({c["listenPort"] for c in confs}) == 2
    assert len({c["storePathRootDir"] for c in confs}) == 2
