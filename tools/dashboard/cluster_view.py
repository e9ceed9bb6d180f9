"""The cluster page: every broker of every cluster with its runtime figures, and the TPS feed
its live chart polls."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.tools.dashboard.templating import render


def _first_tps(text: str | None) -> float:
    """putTps and getTransferedTps read "10 s, 60 s, 600 s" figures; the chart shows the 10 s one."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


async def broker_rows(admin: Admin) -> list[dict[str, Any]]:
    """One row per broker (masters and slaves), with its runtime stats or the reason it gave none."""
    info = await admin.examine_broker_cluster_info()
    rows = []
    for cluster, names in sorted(info.clusterAddrTable.items()):
        for name in sorted(names):
            data = info.brokerAddrTable.get(name)
            if data is None:
                continue
            for broker_id, addr in sorted(data.brokerAddrs.items()):
                row: dict[str, Any] = {"cluster": cluster, "name": name, "id": broker_id, "addr": addr}
                try:
                    stats = await admin.fetch_broker_runtime_stats(addr)
                except (MQClientError, RemotingError, OSError, TimeoutError) as exc:
                    row["error"] = str(exc)
                    stats = {}
                row.update(version=stats.get("brokerVersionDesc", "-"), put_tps=_first_tps(stats.get("putTps")),
                           get_tps=_first_tps(stats.get("getTransferedTps")),
                           put_today=stats.get("msgPutTotalTodayNow", "-"),
                           get_today=stats.get("msgGetTotalTodayNow", "-"), runtime=stats.get("runtime", "-"))
                rows.append(row)
    return rows


async def cluster(request: Request) -> Response:
    return render(request, "cluster.html", brokers=await broker_rows(request.app.state.admin),
                  namesrv=request.app.state.namesrv_addr)


async def tps(request: Request) -> Response:
    rows = await broker_rows(request.app.state.admin)
    return JSONResponse({"time": int(time.time() * 1000), "brokers": [
        {"broker": f"{r['name']}/{r['id']}", "addr": r["addr"], "putTps": r["put_tps"], "getTps": r["get_tps"]}
        for r in rows]})


routes = [Route("/", cluster, name="cluster"), Route("/api/tps", tps, name="tps")]
