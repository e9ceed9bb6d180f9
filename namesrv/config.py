"""NamesrvConfig with RocketMQ's names; paths default under ``~/namesrv`` as in Java."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

# UPDATE_NAMESRV_CONFIG may not touch these: rewriting where files go is how CVE-2023-37582
# turned a config update into a file write anywhere; RocketMQ 4.9.7 refuses them too.
CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"})


def _home() -> str:
    return os.environ.get("ROCKETMQ_HOME", os.path.expanduser("~"))


class NamesrvConfig(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    rocketmqHome: str = Field(default_factory=_home)
    kvConfigPath: str = Field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv",
                                                                   "kvConfig.json"))
    configStorePath: str = Field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv",
                                                                      "namesrv.properties"))
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    # How often brokers are checked for silence, and how long a silent broker is kept (4.9.8:
    # fixed at 10 s and 120 s; settable here so tests need not wait two minutes).
    scanNotActiveBrokerInterval: int = 10000
    brokerChannelExpiredTime: int = 120000
    # Plain ACL as on the broker (docs/acl.md); RocketMQ 4.9's NameServer has none, so this is
    # rocketmq-py's own, off by default. Same file format and keys as BrokerConfig's.
    aclEnable: bool = False
    aclPlainFile: str = "conf/plain_acl.yml"
    aclWatchInterval: int = 5000
    # Prometheus metrics over HTTP on this port (0: any free port); -1, the default, is off.
    metricsPort: int = -1
