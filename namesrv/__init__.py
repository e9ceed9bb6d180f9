"""NameServer: route registry, broker liveness, KV config."""
