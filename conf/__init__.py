"""The bundled RocketMQ-style configuration files, as a package so that every install finds them.

A wheel puts them in ``rocketmq_py/conf/``; an editable install maps the checkout's ``conf/``. The
CLIs resolve their default ``-c`` files here rather than relative to the working directory.
"""

from __future__ import annotations

from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent


def conf_path(*parts: str) -> str:
    """The path of a bundled file, e.g. ``conf_path("2m-noslave", "broker-a.properties")``."""
    return str(CONF_DIR.joinpath(*parts))
