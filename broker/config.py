"""BrokerConfig: the broker's own settings, with RocketMQ 4.9.8's names and defaults.

Network settings (listenPort...) and store settings (storePathRootDir, flushDiskType...) live
in their own models, as in Java; one broker.conf fills all three (common/properties.py).
"""

from __future__ import annotations

import json
import os
import socket

from pydantic import BaseModel, ConfigDict, Field

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.common.properties import ConfigError
from rocketmq_py.remoting.protocol.topic import PermName


def _local_address() -> str:
    """The address clients should dial, like Java's RemotingUtil.getLocalAddress: the host's own
    non-loopback IPv4 address when its name resolves to one, else 127.0.0.1. Set brokerIP1
    explicitly wherever clients reach the broker through another address (containers, NAT)."""
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addr = str(info[4][0])
            if not addr.startswith("127."):
                return addr
    except OSError:
        pass
    return "127.0.0.1"


class BrokerConfig(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    rocketmqHome: str = Field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", os.path.expanduser("~")))
    namesrvAddr: str | None = Field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    brokerIP1: str = Field(default_factory=_local_address)
    brokerIP2: str | None = None
    brokerName: str = Field(default_factory=socket.gethostname)
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = 0
    brokerPermission: int = PermName.PERM_READ | PermName.PERM_WRITE
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    traceTopicEnable: bool = False
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    traceOn: bool = True
    regionId: str = "DefaultRegion"
    flushConsumerOffsetInterval: int = 5000
    rejectTransactionMessage: bool = False
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    notifyConsumerIdsChangedEnable: bool = True
    registerBrokerTimeoutMills: int = 6000
    registerNameServerPeriod: int = 30000
    forceRegister: bool = True
    compressedRegister: bool = False
    slaveReadEnable: bool = False
    enablePropertyFilter: bool = False
    storeReplyMessageEnable: bool = True
    transactionTimeOut: int = 6000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 60000
    # Client channels silent this long are forgotten (ClientHousekeepingService, 120 s).
    channelExpiredTimeout: int = 120000
    # Held pulls are re-checked this often even without new messages (PullRequestHoldService).
    pullHoldCheckInterval: int = 5000
    # Orderly-consumption locks expire this long after their holder's last renewal.
    rebalanceLockMaxLiveTime: int = 60000
    # Plain ACL (docs/acl.md): every request checked against the accounts of aclPlainFile, a
    # path under rocketmqHome unless absolute (Java's rocketmq.acl.plain.file property), which
    # is re-read when it changes, checked every aclWatchInterval ms (Java: a fixed 5 s).
    aclEnable: bool = False
    aclPlainFile: str = "conf/plain_acl.yml"
    aclWatchInterval: int = 5000
    # The account the broker signs its own requests with (registration with the NameServers, a
    # slave's sync with its master): RocketMQ 5.3's AuthConfig name and form, a JSON
    # SessionCredentials {"accessKey": ..., "secretKey": ...}; empty, the default, signs nothing
    # (4.9's broker never signs; docs/acl.md).
    innerClientAuthenticationCredentials: str = ""
    # Prometheus metrics over HTTP on this port (0: any free port); -1, the default, is off.
    metricsPort: int = -1

    def inner_client_credentials(self) -> SessionCredentials | None:
        """innerClientAuthenticationCredentials read; a ConfigError that never repeats the secret."""
        text = self.innerClientAuthenticationCredentials.strip()
        if not text:
            return None
        try:
            fields = json.loads(text)
            return SessionCredentials(fields["accessKey"], fields["secretKey"], fields.get("securityToken"))
        except (ValueError, TypeError, KeyError):
            raise ConfigError('innerClientAuthenticationCredentials: expected JSON '
                              '{"accessKey": "...", "secretKey": "..."} with both keys non-empty') from None

    def broker_addr(self, listen_port: int) -> str:
        return f"{self.brokerIP1}:{listen_port}"

    def ha_server_addr(self, ha_port: int) -> str:
        return f"{self.brokerIP2 or self.brokerIP1}:{ha_port}"

    def namesrv_addr_list(self) -> list[str]:
        return [a.strip() for a in (self.namesrvAddr or "").split(";") if a.strip()]
