"""A PySpark data source for RocketMQ (``format("rocketmq")``): batch and streaming reads of a
topic's ConsumeQueues, and a sink. Needs the ``spark`` extra (pyspark 4, pyarrow)."""

from __future__ import annotations

from typing import Any

from rocketmq_py.client.spark.source import RocketMQDataSource

__all__ = ["RocketMQDataSource", "register"]


def register(spark: Any) -> None:
    """Make ``format("rocketmq")`` available in this SparkSession."""
    spark.dataSource.register(RocketMQDataSource)
