"""Message filtering by SQL92 over message properties (RocketMQ's ``filter`` module).

Pure: text in, a compiled expression out; properties in, a verdict out. No I/O.
"""

from rocketmq_py.broker.filter.sql92 import FilterError, Sql92Expression, compile_sql92

__all__ = ["FilterError", "Sql92Expression", "compile_sql92"]
