"""``mqdashboard``: a web console over the SDK's Admin API, in the spirit of RocketMQ Dashboard.

Cluster and broker status with live TPS charts; topics (create, route, status, send a test
message); consumer groups with lag per queue and offset reset by time; message search by key,
id or time range; a message's trace. Starlette on uvicorn, pages from jinja2 templates; every
figure comes from the NameServer and brokers through ``rocketmq_py.client.admin.Admin``
(docs/dashboard.md). Those libraries are the ``dashboard`` extra, so this module imports none of
them: the console script says what to install when they are missing.
"""

from __future__ import annotations

import importlib.util

from rocketmq_py.common.cli import fail

DEPENDENCIES = ("starlette", "uvicorn", "jinja2", "multipart")


def missing_dependencies() -> list[str]:
    return [name for name in DEPENDENCIES if importlib.util.find_spec(name) is None]


def main() -> None:
    """The ``mqdashboard`` console script."""
    missing = missing_dependencies()
    if missing:
        fail("mqdashboard", f"the dashboard extra is not installed (missing {', '.join(missing)})",
             "pip install 'rocketmq-py[dashboard]'", 2)
    from rocketmq_py.tools.dashboard.startup import cli

    cli()
