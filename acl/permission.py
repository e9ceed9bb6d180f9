"""Permission bits and the admin-only request codes, as Java's ``acl.common.Permission``.

A resource is a topic, or a group written as its retry topic (``%RETRY%group``), so one table
holds both. An account's permission on a resource it does not name is its defaultTopicPerm or
defaultGroupPerm, each DENY when left out.
"""

from __future__ import annotations

from rocketmq_py.acl.acl_exception import AclException
from rocketmq_py.remoting.codes import RequestCode

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

# The spellings plain_acl.yml may use, and the bits each means.
PERM_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# Requests only an account with ``admin: true`` may make: Permission.ADMIN_CODE of 4.9.7, and
# (rocketmq-py's addition, docs/acl.md) the three requests that rewrite plain_acl.yml, which 4.9.7
# leaves to any account -- one that could then make itself admin.
JAVA_ADMIN_CODE = frozenset({
    int(RequestCode.UPDATE_AND_CREATE_TOPIC),
    int(RequestCode.UPDATE_BROKER_CONFIG),
    int(RequestCode.DELETE_TOPIC_IN_BROKER),
    int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
    int(RequestCode.DELETE_SUBSCRIPTIONGROUP),
})
ACL_WRITE_CODE = frozenset({
    int(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG),
    int(RequestCode.DELETE_ACL_CONFIG),
    int(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG),
})
ADMIN_CODE = JAVA_ADMIN_CODE | ACL_WRITE_CODE

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"


def check_permission(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed``: DENY owned refuses all; ANY needs PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_perm(text: str | None) -> int:
    """A permission written in the file; an absent one is DENY, as in Java."""
    if text is None:
        return DENY
    perm = PERM_NAMES.get(text.strip())
    if perm is None:
        raise AclException(f"Parse resource permission error for {text}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
    return perm


def parse_resource_perms(resources: list[str] | None, is_topic: bool) -> dict[str, int]:
    """topicPerms / groupPerms entries (``name=PERM``) as resource -> bits; groups keyed by their
    retry topic."""
    table: dict[str, int] = {}
    for resource in resources or ():
        items = [item for item in resource.split("=") if item]
        if len(items) != 2:
            raise AclException(f"Parse Resource format error for {resource}.\n"
                               "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        name = items[0].strip()
        table[name if is_topic else retry_topic(name)] = parse_perm(items[1])
    return table


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str | None) -> bool:
    return topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def print_resource(resource: str, is_group: bool) -> str:
    """How a refusal names a resource (PlainAccessResource.printStr)."""
    return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}" if is_group else f"topic:{resource}"
