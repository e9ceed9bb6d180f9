"""BrokerOuterAPI: the broker's calls to NameServers (registration and unregistration)."""

from __future__ import annotations

import asyncio
import logging
import ssl
import zlib

from rocketmq_py.acl.acl_client_rpc_hook import AclClientRPCHook
from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.remoting.client import ClientConfig, RemotingClient
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.namesrv import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from rocketmq_py.remoting.protocol.route import KVTable, RegisterBrokerBody

log = logging.getLogger("rocketmq.broker")


class BrokerOuterAPI:
    def __init__(self, ssl_context: ssl.SSLContext | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        # TLS to the NameServers when the broker has tls.enable=true (Java: NettyClientConfig.useTLS);
        # every request signed when the broker has an account (5.3's innerClientAuthenticationCredentials).
        hooks = [AclClientRPCHook(credentials)] if credentials is not None else []
        self.client = RemotingClient(ClientConfig(ssl_context=ssl_context), rpc_hooks=hooks)

    async def register_broker_all(self, namesrv_addrs: list[str], header: RegisterBrokerRequestHeader,
                                  body: RegisterBrokerBody, timeout: float, compressed: bool = False
                                  ) -> list[tuple[str, RemotingCommand | None]]:
        """Register with every NameServer in parallel; a failure with one never blocks the others."""
        payload = body.encode_compressed() if compressed else body.encode()
        header.compressed = compressed
        header.bodyCrc32 = zlib.crc32(payload) & 0x7FFFFFFF

        async def one(addr: str) -> tuple[str, RemotingCommand | None]:
            try:
                response = await self.client.invoke(addr, RemotingCommand.request(
                    RequestCode.REGISTER_BROKER, header, payload), timeout)
            except RemotingError as exc:
                log.warning("register broker to name server %s failed: %s", addr, exc)
                return addr, None
            if response.code != ResponseCode.SUCCESS:
                log.warning("register broker to name server %s refused: %s %s", addr, response.code, response.remark)
                return addr, None
            log.info("register broker[%s] to name server %s OK", header.brokerAddr, addr)
            return addr, response

        return list(await asyncio.gather(*(one(a) for a in namesrv_addrs)))

    @staticmethod
    def order_topic_config(response: RemotingCommand | None) -> dict[str, str] | None:
        if response is None or not response.body:
            return None
        try:
            return KVTable.decode(response.body).table
        except ValueError:
            return None

    async def unregister_broker_all(self, namesrv_addrs: list[str], header: UnRegisterBrokerRequestHeader,
                                    timeout: float) -> None:
        async def one(addr: str) -> None:
            try:
                await self.client.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header), timeout)
                log.info("unregisterBroker OK, NamesrvAddr: %s", addr)
            except RemotingError as exc:
                log.warning("unregisterBroker Exception, %s: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in namesrv_addrs))

    async def close(self) -> None:
        await self.client.close()
