"""A PySpark data source for RocketMQ (``format("rocketmq")``): batch and streaming reads of a
topic's ConsumeQueues, and a sink. Needs the ``spark`` extra (pyspark 4, pyarrow)."""

from __future__ import annotations

import os
import sys
from typing import Any

from rocketmq_py.client.spark.source import RocketMQDataSource

__all__ = ["RocketMQDataSource", "register"]


def _workers_run_this_interpreter(spark: Any) -> None:
    """Point local workers at the driver's interpreter, where rocketmq_py and its dependencies are.

    Spark starts Python workers with ``PYSPARK_PYTHON``, else ``python3`` from PATH: for a script
    run by a venv's python that is another interpreter, without msgpack or this package, and every
    read fails on the workers. On a local master the driver's own interpreter is the right one;
    an explicit PYSPARK_PYTHON or ``spark.pyspark.python`` is left alone, and so is a cluster
    master (its workers need the package installed and PYSPARK_PYTHON set, as for any library).
    """
    if os.environ.get("PYSPARK_PYTHON"):
        return
    try:
        sc = spark.sparkContext  # Spark Connect sessions have none: their server runs the workers
    except Exception:
        return
    if not str(sc.master).startswith("local") or sc.getConf().get("spark.pyspark.python"):
        return
    sc.pythonExec = sys.executable


def register(spark: Any) -> None:
    """Make ``format("rocketmq")`` available in this SparkSession (and its local workers able to run it)."""
    _workers_run_this_interpreter(spark)
    spark.dataSource.register(RocketMQDataSource)
