"""RocketMQ 4.9's plain ACL, its own module as in Java (``rocketmq-acl``), so that both daemons and
the clients may import it: the signing half a client runs (session_credentials,
acl_client_rpc_hook) and the serving half, accounts from plain_acl.yml, the permission a request
needs and the check the processor table runs before each request (docs/acl.md)."""
