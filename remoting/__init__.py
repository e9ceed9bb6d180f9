"""RocketMQ-compatible remoting: commands, framing, header codecs, codes, server and client."""

from remoting.client import ClientConfig, RemotingClient, RPCHook
from remoting.codes import CURRENT_VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.connection import ConnectionEvents, RemotingConnection
from remoting.exceptions import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from remoting.frame import FrameDecoder, FrameError, encode_frame
from remoting.header import CommandHeader, HeaderError, wire
from remoting.processor import RequestProcessor
from remoting.server import RemotingServer, ServerConfig

__all__ = [
    "CURRENT_VERSION",
    "ClientConfig",
    "CommandHeader",
    "ConnectionEvents",
    "FrameDecoder",
    "FrameError",
    "HeaderError",
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
