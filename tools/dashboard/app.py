"""The console's Starlette application: one Admin (and a producer for test messages) shared by
every view, opened and closed with the server; SDK failures rendered as an error page."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.producer import Producer
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.tools.dashboard import cluster_view, consumer_view, message_view, topic_view
from rocketmq_py.tools.dashboard.templating import render

# The groups the console's test messages are sent under, without and with message trace
# (RocketMQ Dashboard's send dialog has the same switch).
DASHBOARD_PRODUCER_GROUP = "PID_MQDASHBOARD"
DASHBOARD_TRACE_PRODUCER_GROUP = "PID_MQDASHBOARD_TRACE"
ADMIN_TIMEOUT = 5.0


class DashboardProducers:
    """The console's two producers, each started on its first test message and closed with it."""

    def __init__(self, namesrv_addr: str | None) -> None:
        self.namesrv_addr = namesrv_addr
        self._producers: dict[bool, Producer] = {}
        self._lock = asyncio.Lock()

    async def get(self, traced: bool) -> Producer:
        async with self._lock:
            producer = self._producers.get(traced)
            if producer is None:
                producer = Producer(DASHBOARD_TRACE_PRODUCER_GROUP if traced else DASHBOARD_PRODUCER_GROUP,
                                    self.namesrv_addr, instance_name="mqdashboard", retry_times_when_send_failed=1,
                                    enable_msg_trace=traced)
                await producer.start()
                self._producers[traced] = producer
            return producer

    async def shutdown(self) -> None:
        for producer in self._producers.values():
            await producer.shutdown()
        self._producers.clear()


async def _sdk_error(request: Request, exc: Exception) -> Response:
    """A refused or failed request as a page saying why, never a stack trace: 400 for a request
    the cluster refused, 502 when it could not be reached."""
    status = 400 if isinstance(exc, MQClientError | ValueError) else 502
    return render(request, "error.html", status_code=status, error=str(exc) or type(exc).__name__)


def create_app(namesrv_addr: str | None) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin = Admin(namesrv_addr, timeout=ADMIN_TIMEOUT, instance_name="mqdashboard")
        producers = DashboardProducers(namesrv_addr)
        await admin.start()
        app.state.admin, app.state.producers, app.state.namesrv_addr = admin, producers, namesrv_addr
        try:
            yield
        finally:
            await producers.shutdown()
            await admin.shutdown()

    app = Starlette(routes=[*cluster_view.routes, *topic_view.routes, *consumer_view.routes, *message_view.routes],
                    lifespan=lifespan,
                    exception_handlers={MQClientError: _sdk_error, RemotingError: _sdk_error,
                                        ValueError: _sdk_error, TimeoutError: _sdk_error, OSError: _sdk_error})
    return app
