"""NameServer commands: getNamesrvConfig, updateNamesrvConfig, updateOrderConf, topicClusterList."""

from __future__ import annotations

import typer

from rocketmq_py.client.admin import Admin
from rocketmq_py.tools.mqadmin.app import app
from rocketmq_py.tools.mqadmin.common import (
    CommandError,
    JsonOption,
    NamesrvOption,
    command,
    emit,
    emit_configs,
    run_admin,
)

# NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG: where order topics' "brokerName:queueNum;..." live.
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def _servers(namesrv: str | None) -> list[str] | None:
    return [s.strip() for s in namesrv.split(";") if s.strip()] if namesrv else None


@command(app, "getNamesrvConfig", "Get configs of name server.")
def get_namesrv_config(
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    emit_configs(as_json, run_admin(namesrv, lambda a: a.get_namesrv_config(_servers(namesrv))))


@command(app, "updateNamesrvConfig", "Update configs of name server.")
def update_namesrv_config(
    key: str = typer.Option(..., "-k", "--key", help="config key"),
    value: str = typer.Option(..., "-v", "--value", help="config value"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    addrs = run_admin(namesrv, lambda a: a.update_namesrv_config({key: value}, _servers(namesrv)))
    if as_json:
        emit(True, {"nameServers": addrs, "key": key, "value": value})
    else:
        typer.echo(f"update name server config success!{addrs}\n{key} : {value}")


def _check_order_conf(conf: str) -> None:
    """``brokerName:queueNums`` pairs split by ``;``, as the NameServer's route reads them."""
    for part in conf.split(";"):
        if not part.strip():
            continue
        name, sep, nums = part.partition(":")
        if not sep or not name.strip() or not nums.strip().isdigit() or int(nums) <= 0:
            raise CommandError(f"bad orderConf entry {part!r}: expected brokerName:queueNums, "
                               "e.g. broker-a:4;broker-b:4")


@command(app, "updateOrderConf", "Create or update or delete order conf")
def update_order_conf(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    method: str = typer.Option(..., "-m", "--method", help="option type [eg. put|get|delete"),
    order_conf: str | None = typer.Option(None, "-v", "--orderConf",
                                          help="set order conf [eg. brokerName1:num;brokerName2:num]"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    method = method.strip()
    if method == "get":
        conf = run_admin(namesrv, lambda a: a.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic))
        if conf is None:
            raise CommandError(f"no orderConf for topic {topic}")
        if as_json:
            emit(True, {"topic": topic, "orderConf": conf})
        else:
            typer.echo(f"get orderConf success. topic=[{topic}], orderConf=[{conf}] ")
    elif method == "put":
        conf = (order_conf or "").strip()
        if not conf:
            raise CommandError("please set orderConf with option -v.")
        _check_order_conf(conf)
        run_admin(namesrv, lambda a: a.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf))
        if as_json:
            emit(True, {"topic": topic, "orderConf": conf})
        else:
            typer.echo(f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
    elif method == "delete":
        run_admin(namesrv, lambda a: a.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic))
        if as_json:
            emit(True, {"topic": topic, "deleted": True})
        else:
            typer.echo(f"delete orderConf success. topic=[{topic}]")
    else:
        raise CommandError(f"-m must be put, get or delete, not {method!r}")


@command(app, "topicClusterList", "get cluster info for topic")
def topic_cluster_list(
    topic: str = typer.Option(..., "-t", "--topic", help="topic name"),
    namesrv: str | None = NamesrvOption,
    as_json: bool = JsonOption,
) -> None:
    async def job(admin: Admin) -> list[str]:
        return sorted(await admin.get_topic_cluster_list(topic))

    clusters = run_admin(namesrv, job)
    if as_json:
        emit(True, clusters)
    else:
        for name in clusters:
            typer.echo(name)
