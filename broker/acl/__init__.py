"""RocketMQ 4.9's plain ACL on the serving side: accounts from plain_acl.yml, the permission a
request needs, and the check the processor table runs before each request (docs/acl.md)."""
