"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rocketmq_py.store.message_store import DefaultMessageStore
from tests.store_helpers import small_config


@pytest.fixture
async def store(tmp_path: str) -> AsyncIterator[DefaultMessageStore]:
    """A started store with small files under the test's temp dir, shut down after the test."""
    s = DefaultMessageStore(small_config(str(tmp_path)))
    await s.load()
    await s.start()
    yield s
    if not s.shutdown_flag:
        await s.shutdown()
