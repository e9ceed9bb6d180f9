"""Threads a daemon needs, and a new store's first CommitLog file, are made before it serves,
never by a request: ``Thread.start`` waits until the new thread runs, and inside a put that held
every message in flight (docs/latency.md, "Threads started at boot")."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from rocketmq_py.common.daemon import start_default_executor
from rocketmq_py.store.message_store import DefaultMessageStore, PutMessageStatus
from tests.store_helpers import message


def _idents() -> set[int | None]:
    return {t.ident for t in threading.enumerate()}


def test_the_default_executor_has_all_its_threads_before_any_task() -> None:
    loop = asyncio.new_event_loop()
    try:
        before = _idents()
        workers = start_default_executor(loop)
        started = _idents() - before
        assert workers >= 5 and len(started) == workers
        # As many overlapping to_thread calls as there are workers start no thread: each finds one idle.
        barrier = threading.Barrier(workers, timeout=10.0)

        async def overlap() -> None:
            await asyncio.gather(*(asyncio.to_thread(barrier.wait) for _ in range(workers)))

        loop.run_until_complete(overlap())
        assert _idents() - before == started
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the page warmer is Linux's")
async def test_a_store_starts_its_threads_with_it_not_at_the_first_put(store: DefaultMessageStore) -> None:
    names = {t.name for t in threading.enumerate()}
    if store.commit_log.warmer.enabled:
        assert "PageWarmer" in names
    assert any(name.startswith("AllocateMappedFileService") for name in names)
    assert any(name.startswith("AllocateConsumeQueueService") for name in names)
    # A new store's first CommitLog file is being made by the allocator already.
    assert store.commit_log.queue.files == [] and store.commit_log.queue._next is not None
    before = _idents()
    result = await store.put_message(message("PrestartTopic", b"x" * 100))
    assert result.status is PutMessageStatus.PUT_OK
    # The first put made the first CommitLog file and, warming on, asked for its pages: no thread.
    first = store.commit_log.queue.files[0]
    assert first.warm_requested > 0 or not store.commit_log.warmer.enabled
    assert _idents() == before
    # It was that file the put took; the allocator makes the next one now.
    assert first.file_from_offset == 0 and store.commit_log.queue._next is not None
