"""ACL commands, as RocketMQ 4.9.7's mqadmin names them: updateAclConfig, deleteAccessConfig,
updateGlobalWhiteAddr, clusterAclConfigVersion, getAccessConfigSubCommand (alias getAclConfig).
Each goes to one broker (-b) or every master of a cluster (-c); docs/acl.md."""

from __future__ import annotations

import json
from typing import Any

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.remoting.protocol.acl import CreateAccessConfigRequestHeader
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.cluster_commands import _require_target
from rocketmq_py.tools.mqadmin.common import CommandError, JsonOption, NamesrvOption, command, emit, run_admin

BrokerOption = typer.Option(None, "-b", "--brokerAddr", help="which broker")
ClusterOption = typer.Option(None, "-c", "--clusterName", help="every master of which cluster")


def _on_each(namesrv: str | None, broker_addr: str | None, cluster: str | None, what: str,
             call: Any) -> list[str]:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> list[str]:
        addrs = await admin.broker_addrs(broker_addr, cluster)
        for addr in addrs:
            await call(admin, addr)
        return addrs

    addrs = run_admin(namesrv, job)
    for addr in addrs:
        typer.echo(f"{what} to {addr} success.")
    return addrs


@command(app, "updateAclConfig", "Update acl config yaml file in broker")
def update_acl_config(
    access_key: str = typer.Option(..., "-a", "--accessKey", help="set accessKey in acl config file"),
    secret_key: str = typer.Option(..., "-s", "--secretKey", help="set secretKey in acl config file"),
    white_remote_address: str | None = typer.Option(None, "-w", "--whiteRemoteAddress",
                                                    help="set white ip Address for account in acl config file"),
    default_topic_perm: str | None = typer.Option(None, "-i", "--defaultTopicPerm", help="set default topicPerm"),
    default_group_perm: str | None = typer.Option(None, "-u", "--defaultGroupPerm", help="set default GroupPerm"),
    topic_perms: str | None = typer.Option(None, "-t", "--topicPerms", help="eg: topicA=DENY,topicD=SUB"),
    group_perms: str | None = typer.Option(None, "-g", "--groupPerms", help="eg: groupD=DENY,groupD=SUB"),
    admin_flag: str | None = typer.Option(None, "-m", "--admin", help="set admin flag in acl config file (true/false)"),
    broker_addr: str | None = BrokerOption,
    cluster: str | None = ClusterOption,
    namesrv: str | None = NamesrvOption,
) -> None:
    if admin_flag is not None and admin_flag.lower() not in ("true", "false"):
        raise CommandError(f"-m takes true or false, not {admin_flag!r}")
    header = CreateAccessConfigRequestHeader(
        accessKey=access_key, secretKey=secret_key, whiteRemoteAddress=white_remote_address,
        admin=admin_flag is not None and admin_flag.lower() == "true", defaultTopicPerm=default_topic_perm,
        defaultGroupPerm=default_group_perm, topicPerms=topic_perms, groupPerms=group_perms)
    _on_each(namesrv, broker_addr, cluster, "create or update plain access config",
             lambda admin, addr: admin.create_and_update_plain_access_config(addr, header))


@command(app, "deleteAccessConfig", "Delete Acl Config Account in broker")
def delete_access_config(
    access_key: str = typer.Option(..., "-a", "--accessKey", help="the account to delete"),
    broker_addr: str | None = BrokerOption,
    cluster: str | None = ClusterOption,
    namesrv: str | None = NamesrvOption,
) -> None:
    _on_each(namesrv, broker_addr, cluster, f"delete plain access config account {access_key}",
             lambda admin, addr: admin.delete_plain_access_config(addr, access_key))


@command(app, "updateGlobalWhiteAddr", "Update global white address for acl Config File in broker")
def update_global_white_addr(
    addresses: str = typer.Option(..., "-g", "--globalWhiteRemoteAddresses",
                                  help="globalWhiteRemoteAddress list, eg: 10.10.103.*,192.168.0.*"),
    acl_file: str | None = typer.Option(None, "-p", "--aclFileFullPath", help="the broker's acl file to update"),
    broker_addr: str | None = BrokerOption,
    cluster: str | None = ClusterOption,
    namesrv: str | None = NamesrvOption,
) -> None:
    _on_each(namesrv, broker_addr, cluster, "update global white remote addresses",
             lambda admin, addr: admin.update_global_white_addr_config(addr, addresses, acl_file))


@command(app, "clusterAclConfigVersion", "List all of acl config version information in cluster")
def cluster_acl_config_version(
    broker_addr: str | None = BrokerOption,
    cluster: str | None = ClusterOption,
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> list[dict[str, Any]]:
        out = []
        for addr in await admin.broker_addrs(broker_addr, cluster):
            info = await admin.examine_broker_cluster_acl_version_info(addr)
            version = json.loads(info.version)
            out.append({"clusterName": info.clusterName, "brokerName": info.brokerName, "brokerAddr": addr,
                        "counter": version.get("counter"), "timestamp": version.get("timestamp"),
                        "allAclFileVersion": json.loads(info.allAclFileVersion or "{}")})
        return out

    rows = run_admin(namesrv, job)
    emit(as_json, rows, ["#Cluster Name", "#Broker Name", "#Broker Addr", "#AclConfigVersionNum", "#AclLastUpdateTime"],
         [[r["clusterName"], r["brokerName"], r["brokerAddr"], r["counter"], r["timestamp"]] for r in rows])


def get_access_config(
    broker_addr: str | None = BrokerOption,
    cluster: str | None = ClusterOption,
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    _require_target(broker_addr, cluster)

    async def job(admin: Admin) -> dict[str, Any]:
        return {addr: json.loads((await admin.get_broker_cluster_acl_config(addr)).encode())
                for addr in await admin.broker_addrs(broker_addr, cluster)}

    configs = run_admin(namesrv, job)
    if as_json:
        emit(True, configs)
        return
    for addr, config in configs.items():
        typer.echo(f"\n{'#Broker Address':<20s}{addr}")
        typer.echo(f"{'#globalWhiteAddrs':<20s}{','.join(config.get('globalWhiteAddrs', []))}")
        for account in config.get("plainAccessConfigs", []):
            typer.echo("")
            for key in ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                        "defaultGroupPerm", "topicPerms", "groupPerms"):
                value = account.get(key)
                typer.echo(f"{'#' + key:<20s}{','.join(value) if isinstance(value, list) else value}")


# Java's name, and getAclConfig as a shorter alias: one command under both names.
command(app, "getAccessConfigSubCommand", "List all of acl config information in cluster")(get_access_config)
command(app, "getAclConfig", "List all of acl config information in cluster (getAccessConfigSubCommand)")(
    get_access_config)
