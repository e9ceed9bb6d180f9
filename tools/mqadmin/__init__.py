"""``mqadmin``: RocketMQ's admin commands against any NameServer (``-n`` or ``NAMESRV_ADDR``)."""

from __future__ import annotations

from tools.mqadmin import cluster_commands, consumer_commands, message_commands, topic_commands
from tools.mqadmin.app import app
from tools.mqadmin.common import main_entry

__all__ = ["app", "cluster_commands", "consumer_commands", "main", "message_commands", "topic_commands"]


def main() -> None:
    main_entry(app, "mqadmin")
