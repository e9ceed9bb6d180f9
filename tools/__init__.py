"""Operator tools: ``mqadmin`` (RocketMQ's admin commands), ``mqbench`` (benchmark producer and
consumer) and ``mqcluster`` (a local two-master cluster from ``conf/``)."""
