"""RocketMQ-compatible remoting: commands, framing, header codecs, codes, server and client."""

from rocketmq_py.remoting.client import ClientConfig, RemotingClient
from rocketmq_py.remoting.codes import CURRENT_VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import ConnectionEvents, RemotingConnection
from rocketmq_py.remoting.exceptions import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from rocketmq_py.remoting.frame import FrameDecoder, FrameError, encode_frame
from rocketmq_py.remoting.header import CommandHeader, HeaderError, Int32, Int64, wire
from rocketmq_py.remoting.processor import RequestProcessor
from rocketmq_py.remoting.rpc_hook import RPCHook
from rocketmq_py.remoting.server import RemotingServer, ServerConfig

__all__ = [
    "CURRENT_VERSION",
    "ClientConfig",
    "CommandHeader",
    "ConnectionEvents",
    "FrameDecoder",
    "FrameError",
    "HeaderError",
    "Int32",
    "Int64",
    "LanguageCode",
    "RPCHook",
    "RemotingClient",
    "RemotingCommand",
    "RemotingConnectError",
    "RemotingConnection",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "RequestCode",
    "RequestProcessor",
    "ResponseCode",
    "SerializeType",
    "ServerConfig",
    "encode_frame",
    "wire",
]
