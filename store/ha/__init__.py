"""Master/slave replication of the CommitLog over the HA port, as RocketMQ 4.9's store/ha (docs/ha.md)."""
