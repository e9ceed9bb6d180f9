"""One logging setup for every daemon: console on stdout, and a rotating file where RocketMQ keeps
its logs (``<home>/logs/rocketmqlogs/<daemon>.log``; Java's home is the user's, ours is
``rocketmqHome``, which defaults to it), plus the start-up lines RocketMQ operators look for:
the effective configuration, one ``key=value`` per line, in the log file.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from collections.abc import Iterable

from pydantic import BaseModel

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s - %(message)s"
# Config dumps go to the file only: dozens of lines per start would bury the console's boot line.
CONFIG_LOGGER = "rocketmq.config"
# RocketMQ's logback keeps 10 files of 1 GiB for broker.log; smaller files suit a dev machine.
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_BACKUP_COUNT = 10

_installed: list[logging.Handler] = []


def default_log_dir(home: str) -> str:
    return os.path.join(home, "logs", "rocketmqlogs")


class _NotConfig(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(CONFIG_LOGGER)


def setup_logging(daemon: str, level: str = "INFO", log_dir: str | None = None, *,
                  max_bytes: int | None = None, backup_count: int | None = None) -> str | None:
    """Install the console and file handlers on the root logger (replacing ones installed by an
    earlier call); returns the log file's path, or None when ``log_dir`` is None (console only).
    ``ROCKETMQ_LOG_MAX_BYTES`` / ``ROCKETMQ_LOG_BACKUP_COUNT`` override the rotation defaults."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    reset_logging()
    root = logging.getLogger()
    formatter = logging.Formatter(LOG_FORMAT)
    console = logging.StreamHandler(sys.stdout)
    console.setFormatter(formatter)
    console.addFilter(_NotConfig())
    _installed.append(console)
    path = None
    if log_dir is not None:
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, f"{daemon}.log")
        max_bytes = max_bytes if max_bytes is not None else int(os.environ.get("ROCKETMQ_LOG_MAX_BYTES",
                                                                                DEFAULT_MAX_BYTES))
        backup_count = backup_count if backup_count is not None else int(os.environ.get(
            "ROCKETMQ_LOG_BACKUP_COUNT", DEFAULT_BACKUP_COUNT))
        file_handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backup_count,
                                                            encoding="utf-8")
        file_handler.setFormatter(formatter)
        # Before the console: whoever sees a line on the console (a test waiting for the boot
        # line, an operator) finds it in the file too.
        _installed.insert(0, file_handler)
    for handler in _installed:
        root.addHandler(handler)
    root.setLevel(numeric)
    return path


def log_config(*models: BaseModel | Iterable[tuple[str, object]]) -> None:
    """Every effective config item, as Java's MixAll.printObjectProperties does at start-up."""
    log = logging.getLogger(CONFIG_LOGGER)
    for model in models:
        items = model.model_dump().items() if isinstance(model, BaseModel) else model
        for key, value in items:
            log.info("%s=%s", key, value)


def reset_logging() -> None:
    """Remove what setup_logging installed (tests, and daemons embedding another's setup)."""
    root = logging.getLogger()
    for handler in _installed:
        root.removeHandler(handler)
        handler.close()
    _installed.clear()
