"""UPDATE_BROKER_CONFIG's rule on the controller itself: any update is either applied whole to the
running broker and store config or refused whole with a reason, and a refusal changes nothing."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.controller import STARTUP_ONLY_KEYS, BrokerController
from rocketmq_py.common.properties import ConfigError
from rocketmq_py.remoting.server_config import NettyServerConfig
from rocketmq_py.store.config import MessageStoreConfig

KEYS = sorted({*BrokerConfig.model_fields, *MessageStoreConfig.model_fields, "listenPort", "noSuchKey"})
VALUES = st.one_of(st.integers(-2**40, 2**40).map(str), st.sampled_from(["true", "false", "abc", "", "1.5", "04"]),
                   st.text(max_size=12))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> BrokerController:
    root = str(tmp_path_factory.mktemp("update_config"))
    return BrokerController(BrokerConfig(brokerName="b", namesrvAddr=None, brokerIP1="127.0.0.1", rocketmqHome=root),
                            NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"),
                            MessageStoreConfig(storePathRootDir=os.path.join(root, "store")))


def _state(broker: BrokerController) -> tuple[dict[str, object], dict[str, object]]:
    return broker.broker_config.model_dump(), broker.store_config.model_dump()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=4))
def test_an_update_is_applied_whole_or_refused_whole(broker: BrokerController, props: dict[str, str]) -> None:
    before = _state(broker)
    try:
        broker.update_config(props)
    except ConfigError as exc:
        assert _state(broker) == before, "a refused update changed the config"
        assert any(key in str(exc) for key in props), str(exc)
        return
    assert not props.keys() & STARTUP_ONLY_KEYS and "listenPort" not in props and "noSuchKey" not in props
    for key, text in props.items():
        config = broker.broker_config if key in BrokerConfig.model_fields else broker.store_config
        expected = type(config).model_validate({**config.model_dump(exclude_none=True), key: text})
        assert getattr(config, key) == getattr(expected, key), key


def test_store_keys_reach_the_running_store(broker: BrokerController) -> None:
    broker.update_config({"fileReservedTime": "1", "maxMessageSize": "2048"})
    assert broker.message_store.config.fileReservedTime == 1
    assert broker.message_store.config.maxMessageSize == 2048
    with pytest.raises(ConfigError, match="maxMessageSize"):
        broker.update_config({"maxMessageSize": "abc", "fileReservedTime": "5"})
    assert broker.message_store.config.fileReservedTime == 1  # the good key of a refused update: not applied
    with pytest.raises(ConfigError, match="start-up"):
        broker.update_config({"storePathRootDir": "/elsewhere"})
