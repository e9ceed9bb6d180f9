"""Building messages and small-file stores for the store tests."""

from __future__ import annotations

from rocketmq_py.remoting.protocol.message import MessageConst, properties_to_string, tags_string_to_tags_code
from rocketmq_py.store.commit_log import MessageExtBatch, MessageExtBrokerInner
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.store.message_store import DefaultMessageStore

STORE_HOST = ("127.0.0.1", 10911)


def small_config(root: str, **overrides: object) -> MessageStoreConfig:
    base: dict[str, object] = {"storePathRootDir": root, "mappedFileSizeCommitLog": 64 * 1024,
                               "mappedFileSizeConsumeQueue": 50 * 20, "maxHashSlotNum": 64, "maxIndexNum": 256,
                               "flushIntervalCommitLog": 50, "flushIntervalConsumeQueue": 50}
    base.update(overrides)
    return MessageStoreConfig(**base)  # type: ignore[arg-type]


def message_properties(tags: str | None, keys: str | None, uniq: str | None,
                       extra: dict[str, str] | None = None) -> dict[str, str]:
    """A message's properties as a producer sets them: ``extra``, then TAGS, KEYS and the unique
    id where given (for stored records here and sent requests in tests/integration/broker_client.py)."""
    props = dict(extra or {})
    if tags:
        props[MessageConst.TAGS] = tags
    if keys:
        props[MessageConst.KEYS] = keys
    if uniq:
        props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
    return props


def message(topic: str, body: bytes, queue_id: int = 0, tags: str | None = None, keys: str | None = None,
            uniq: str | None = None, born_host: tuple[str, int] = ("10.1.2.3", 5555), sys_flag: int = 0,
            extra: dict[str, str] | None = None) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(
        topic=topic, body=body, queue_id=queue_id,
        properties_string=properties_to_string(message_properties(tags, keys, uniq, extra)),
        tags_code=tags_string_to_tags_code(tags), sys_flag=sys_flag, born_timestamp=1700000000123,
        born_host=born_host, store_host=STORE_HOST)


def batch(topic: str, bodies: list[bytes], queue_id: int = 0, tags: str | None = None,
          properties: list[str] | None = None, born_host: tuple[str, int] = ("10.1.2.3", 5555)) -> MessageExtBatch:
    """A batch as the broker hands it over: each entry's properties (default TAGS only) are
    what is stored, and its tag hash is that of its TAGS."""
    props = properties or [f"{MessageConst.TAGS}\x01{tags}" if tags else "" for _ in bodies]
    return MessageExtBatch(topic, queue_id, [(0, body, p.encode(), tags_string_to_tags_code(tags))
                                             for body, p in zip(bodies, props, strict=True)],
                           born_timestamp=1700000000123, born_host=born_host, store_host=STORE_HOST)


async def index_caught_up(store: DefaultMessageStore, timeout: float = 30.0) -> None:
    """Wait (bounded) until the index child has indexed every record put so far.

    A query waits at most a second for the child itself; on a loaded machine a child that has
    just been spawned can take longer than that to import and start, which is not what these
    tests are about. Without a child (inline index) there is nothing to wait for."""
    if store.index_dispatch is not None:
        assert await store.index_dispatch.wait_indexed_async(timeout), "the index child did not catch up"


async def restarted(store: DefaultMessageStore) -> DefaultMessageStore:
    """The same store shut down and loaded again from its files, as a broker restart does."""
    await store.shutdown()
    again = DefaultMessageStore(store.config)
    await again.load()
    await again.start()
    return again
