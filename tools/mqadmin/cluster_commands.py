"""Cluster and broker commands: clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig,
wipeWritePerm, updateKvConfig, deleteKvConfig, clusterRT."""

from __future__ import annotations

import time

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.client.message import Message
from rocketmq_py.client.producer import Producer
from rocketmq_py.remoting.protocol.ha import HARuntimeInfo
from rocketmq_py.remoting.protocol.route import MASTER_ID
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import (
    CommandError,
    JsonOption,
    NamesrvOption,
    command,
    emit,
    emit_configs,
    emit_kv,
    format_ts,
    run_admin,
    typed,
)


def _require_target(broker_addr: str | None, cluster: str | None) -> None:
    if not broker_addr and not cluster:
        raise CommandError("one of -b brokerAddr or -c clusterName is required")


def _last_10s(tps: str | None) -> float:
    """The first of a broker's "10 s 60 s 600 s" rates, as Java's clusterList reads it (0 until
    the broker has sampled for 10 s)."""
    first = (tps or "").split(" ")[0]
    try:
        return float(first) if first else 0.0
    except ValueError:
        return 0.0


def cluster_row(stats: dict[str, str]) -> dict[str, object]:
    """One broker's clusterList figures from its runtime info, as Java's ClusterListSubCommand
    computes them: 10 s in/out TPS with the send/pull queue size and head wait, the page-cache
    lock wait, hours since the oldest stored message, and the CommitLog disk's used fraction."""
    earliest = stats.get("earliestMessageTimeStamp")
    hours = (time.time() * 1000 - int(earliest)) / 3_600_000 if earliest else 0.0
    ratio = stats.get("commitLogDiskRatio")
    return {"version": stats.get("brokerVersionDesc", ""),
            "inTps": _last_10s(stats.get("putTps")), "outTps": _last_10s(stats.get("getTransferedTps")),
            "sendQueue": typed(stats.get("sendThreadPoolQueueSize")),
            "sendWaitMills": typed(stats.get("sendThreadPoolQueueHeadWaitTimeMills")),
            "pullQueue": typed(stats.get("pullThreadPoolQueueSize")),
            "pullWaitMills": typed(stats.get("pullThreadPoolQueueHeadWaitTimeMills")),
            "pageCacheLockTimeMills": typed(stats.get("pageCacheLockTimeMills")),
            "hour": hours, "diskRatio": float(ratio) if ratio else 0.0, **ha_row(stats)}


# The runtime-info HA keys clusterList --json carries (docs/ha.md, operators).
HA_ROW_KEYS = ("haMaster", "haSlaveNum", "haInSyncSlaveNums", "haPush2SlaveMaxOffset", "haMasterAddr",
               "haClientActivated", "haClientMaxOffset", "haMasterCommitLogMaxOffset", "slaveFallBehindMuch")


def ha_row(stats: dict[str, str]) -> dict[str, object]:
    """A broker's HA figures from its runtime info (none from a broker without them, as Java's)."""
    return {key: typed(stats[key]) for key in HA_ROW_KEYS if key in stats}


def ha_cell(row: dict[str, object]) -> str:
    """clusterList's #HA column: a master's unacknowledged bytes and its slave count, a slave's
    bytes behind its master ("?" when the master did not answer), empty without HA keys."""
    behind = row.get("slaveFallBehindMuch")
    if behind is None:
        return ""
    if row.get("haMaster") is False:
        return "? B behind" if behind == -1 else f"{behind} B behind"
    slaves = row.get("haSlaveNum", 0)
    return f"{behind} B unacked, {slaves} slave(s)" if slaves else "no slave"


@command(app, "clusterList", "List cluster infos")
def cluster_list(
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> list[dict[str, object]]:
        info = await admin.examine_broker_cluster_info()
        if cluster and cluster not in info.clusterAddrTable:
            raise CommandError(f"cluster {cluster} not found (known: {', '.join(sorted(info.clusterAddrTable))})")
        rows: list[dict[str, object]] = []
        for cluster_name, broker_names in sorted(info.clusterAddrTable.items()):
            if cluster and cluster_name != cluster:
                continue
            for name in sorted(broker_names):
                data = info.brokerAddrTable.get(name)
                for broker_id, addr in sorted((data.brokerAddrs if data else {}).items()):
                    try:
                        stats = await admin.fetch_broker_runtime_stats(addr)
                    except Exception:  # a broker that does not answer is still listed, like Java
                        stats = {}
                    rows.append({"cluster": cluster_name, "brokerName": name, "brokerId": broker_id, "addr": addr,
                                 **cluster_row(stats)})
        return rows

    rows = run_admin(namesrv, job)
    emit(as_json, rows, ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                         "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE", "#HA"),
         [(r["cluster"], r["brokerName"], r["brokerId"], r["addr"], r["version"],
           f"{r['inTps']:.2f}({r['sendQueue']},{r['sendWaitMills']}ms)",
           f"{r['outTps']:.2f}({r['pullQueue']},{r['pullWaitMills']}ms)", r["pageCacheLockTimeMills"],
           f"{r['hour']:.2f}", f"{r['diskRatio']:.4f}", ha_cell(r)) for r in rows])


@command(app, "brokerStatus", "Fetch broker runtime status data")
def broker_status(
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="Broker address"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> dict[str, dict[str, str]]:
        return {addr: await admin.fetch_broker_runtime_stats(addr)
                for addr in await admin.broker_addrs(broker_addr, cluster)}

    result = run_admin(namesrv, job)
    if as_json:
        emit(True, typed(result))
        return
    for addr, stats in result.items():
        emit_kv(False, stats, title=addr)


@command(app, "haStatus", "Fetch ha runtime status data")
def ha_status(
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="which broker to fetch"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    """RocketMQ 5.x's haStatus (GET_BROKER_HA_STATUS): a master's slaves with their acknowledged
    offsets and gaps, or a slave's master and offset; ``-c`` asks every master of the cluster."""
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> dict[str, HARuntimeInfo]:
        return {addr: await admin.get_broker_ha_status(addr)
                for addr in await admin.broker_addrs(broker_addr, cluster)}

    result = run_admin(namesrv, job)
    if as_json:
        emit(True, {addr: info.model_dump() for addr, info in result.items()})
        return
    for addr, info in result.items():
        if info.master:
            typer.echo(f"\n#MasterAddr\t{addr}\n#MasterCommitLogMaxOffset\t{info.masterCommitLogMaxOffset}\n"
                       f"#SlaveNum\t{len(info.haConnectionInfo)}\n#InSyncSlaveNum\t{info.inSyncSlaveNums}")
            emit(False, None, ("#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                               "#TransferFromWhere"),
                 [(c.addr, c.slaveAckOffset, c.diff, f"{c.transferredByteInSecond / 1024:.2f}",
                   "OK" if c.inSync else "Fall Behind", c.transferFromWhere) for c in info.haConnectionInfo])
        else:
            client = info.haClientRuntimeInfo
            typer.echo(f"\n#MasterAddr\t{client.masterAddr}\n#CommitLogMaxOffset\t{client.maxOffset}\n"
                       f"#TransferSpeed(KB/s)\t{client.transferredByteInSecond / 1024:.2f}\n"
                       f"#LastReadTime\t{format_ts(client.lastReadTimestamp)}\n"
                       f"#LastWriteTime\t{format_ts(client.lastWriteTimestamp)}\n"
                       f"#MasterFlushOffset\t{client.masterFlushOffset}")


@command(app, "getBrokerConfig", "Get broker config by cluster or special broker")
def get_broker_config(
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="get which broker"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="get which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> dict[str, dict[str, str]]:
        return {addr: await admin.get_broker_config(addr) for addr in await admin.broker_addrs(broker_addr, cluster)}

    emit_configs(as_json, run_admin(namesrv, job))


@command(app, "updateBrokerConfig", "Update broker's config")
def update_broker_config(
    key: str = typer.Option(..., "-k", "--key", help="config key"),
    value: str = typer.Option(..., "-v", "--value", help="config value"),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="update which broker"),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="update which cluster"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> list[str]:
        addrs = await admin.broker_addrs(broker_addr, cluster)
        for addr in addrs:
            await admin.update_broker_config(addr, {key: value})
        return addrs

    addrs = run_admin(namesrv, job)
    if as_json:
        emit(True, {"brokers": addrs, "key": key, "value": value})
    else:
        for addr in addrs:
            typer.echo(f"update broker config success, {addr}")


@command(app, "wipeWritePerm", "Wipe write perm of broker in all name server")
def wipe_write_perm(
    broker_name: str = typer.Option(..., "-b", "--brokerName", help="broker name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    counts = run_admin(namesrv, lambda a: a.wipe_write_perm_of_broker(broker_name))
    if as_json:
        emit(True, counts)
        return
    for addr, count in counts.items():
        typer.echo(f"wipe write perm of broker[{broker_name}] in name server[{addr}] OK, {count}")


@command(app, "updateKvConfig", "Create or update KV config")
def update_kv_config(
    namespace: str = typer.Option(..., "-s", "--namespace", help="set the namespace"),
    key: str = typer.Option(..., "-k", "--key", help="set the key name"),
    value: str = typer.Option(..., "-v", "--value", help="set the key value"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    run_admin(namesrv, lambda a: a.put_kv_config(namespace, key, value))
    if as_json:
        emit(True, {"namespace": namespace, "key": key, "value": value})
    else:
        typer.echo("create or update kv config to namespace success.")


@command(app, "deleteKvConfig", "Delete KV config")
def delete_kv_config(
    namespace: str = typer.Option(..., "-s", "--namespace", help="set the namespace"),
    key: str = typer.Option(..., "-k", "--key", help="set the key name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> None:
        if await admin.get_kv_config(namespace, key) is None:
            raise CommandError(f"no KV config {namespace}/{key}")
        await admin.delete_kv_config(namespace, key)

    run_admin(namesrv, job)
    if as_json:
        emit(True, {"namespace": namespace, "key": key, "deleted": True})
    else:
        typer.echo("delete kv config from namespace success.")


@command(app, "clusterRT", "List all clusters message send RT")
def cluster_rt(
    amount: int = typer.Option(100, "-a", "--amount", help="message amount per broker"),
    size: int = typer.Option(128, "-s", "--size", help="message size in bytes"),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="cluster name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    """Send ``amount`` messages to each master's own broker topic (named after the broker, as
    Java's ClusterSendMsgRTCommand does) and report the mean send RT per broker."""
    if amount <= 0 or size <= 0:
        raise CommandError("-a and -s must be positive")

    async def job(admin: Admin) -> list[dict[str, object]]:
        info = await admin.examine_broker_cluster_info()
        if cluster and cluster not in info.clusterAddrTable:
            raise CommandError(f"cluster {cluster} not found")
        rows: list[dict[str, object]] = []
        async with Producer("PID_SMSC_RT", admin.config.namesrv_addr, send_msg_timeout=3.0,
                            retry_times_when_send_failed=0) as producer:
            for cluster_name, names in sorted(info.clusterAddrTable.items()):
                if cluster and cluster_name != cluster:
                    continue
                for name in sorted(names):
                    if MASTER_ID not in info.brokerAddrTable[name].brokerAddrs:
                        continue
                    ok = failed = 0
                    spent = 0.0
                    for _ in range(amount):
                        started = time.perf_counter()
                        try:
                            await producer.send(Message(name, b"x" * size))
                            ok += 1
                            spent += time.perf_counter() - started
                        except Exception:
                            failed += 1
                    rows.append({"cluster": cluster_name, "brokerName": name,
                                 "rtMs": round(spent * 1000 / ok, 3) if ok else None,
                                 "successCount": ok, "failCount": failed})
        return rows

    rows = run_admin(namesrv, job)
    emit(as_json, rows, ("#Cluster Name", "#Broker Name", "#RT(ms)", "#successCount", "#failCount"),
         [(r["cluster"], r["brokerName"], r["rtMs"], r["successCount"], r["failCount"]) for r in rows])
