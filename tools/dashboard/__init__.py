"""``mqdashboard``: a web console over the SDK's Admin API, in the spirit of RocketMQ Dashboard.

Cluster and broker status with live TPS charts; topics (create, route, status, send a test
message); consumer groups with lag per queue and offset reset by time; message search by key,
id or time range; a message's trace. Starlette on uvicorn, pages from jinja2 templates; every
figure comes from the NameServer and brokers through ``rocketmq_py.client.admin.Admin``.
"""

from rocketmq_py.tools.dashboard.app import create_app

__all__ = ["create_app"]
