"""Held pulls wake on a matching arrival, on the periodic check, or at their deadline."""

from __future__ import annotations

import asyncio

from rocketmq_py.broker.pull_hold import PullRequest, PullRequestHoldService
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import RemotingConnection


class _OpenChannel(RemotingConnection):
    @property
    def is_open(self) -> bool:  # a held pull is only re-run for a live connection
        return True


async def _service(max_offsets: dict[tuple[str, int], int]) -> tuple[PullRequestHoldService, asyncio.Queue[int]]:
    woken: asyncio.Queue[int] = asyncio.Queue()

    def executor(conn: RemotingConnection, request: RemotingCommand) -> None:
        woken.put_nowait(request.opaque)

    return PullRequestHoldService(executor, lambda t, q: max_offsets.get((t, q), 0), check_interval=3600), woken


def _pull(opaque: int, offset: int, suspend: float = 30.0, tag: int | None = None) -> PullRequest:
    from rocketmq_py.remoting.processor import ProcessorTable

    request = RemotingCommand(11, opaque=opaque)
    return PullRequest(request, _OpenChannel(ProcessorTable()), "T", 0, offset, suspend,
                       matches=(lambda code: True) if tag is None else (lambda code: code is None or code == tag))


async def test_arrival_wakes_only_matching_pulls() -> None:
    service, woken = await _service({})
    service.suspend_pull_request(_pull(1, 5, tag=111))
    service.suspend_pull_request(_pull(2, 5, tag=222))
    service.suspend_pull_request(_pull(3, 9))
    service.notify_message_arriving("T", 0, 6, tags_code=111)
    assert await asyncio.wait_for(woken.get(), 2) == 1
    assert service.held == 2, "tag 222 and the pull at offset 9 stay parked"
    service.notify_message_arriving("T", 1, 99)  # another queue: nothing
    assert service.held == 2
    await service.shutdown()


async def test_periodic_check_and_deadline() -> None:
    offsets = {("T", 0): 0}
    service, woken = await _service(offsets)
    service.suspend_pull_request(_pull(1, 0))
    service.suspend_pull_request(_pull(2, 0, suspend=0.05))
    assert await asyncio.wait_for(woken.get(), 2) == 2, "the short pull is answered at its deadline"
    offsets[("T", 0)] = 1
    service.check_hold_request()
    assert await asyncio.wait_for(woken.get(), 2) == 1
    assert service.held == 0
    await service.shutdown()


def _suspend_selector_pull(service: PullRequestHoldService) -> None:
    """A pull whose SQL92 selector wants the property ``a`` = 7."""
    pull = _pull(1, 0)
    pull.matches_properties = lambda text: "a\x017" in text.split("\x02")
    service.suspend_pull_request(pull)


async def test_sql_pull_wakes_only_for_matching_properties() -> None:
    service, woken = await _service({})
    _suspend_selector_pull(service)
    service.notify_message_arriving("T", 0, 1, tags_code=0, properties="a\x011")
    assert service.held == 1, "properties the selector refuses leave the pull parked"
    service.notify_message_arriving("T", 0, 2, tags_code=0, properties="b\x012\x02a\x017")
    assert await asyncio.wait_for(woken.get(), 2) == 1
    service.suspend_pull_request(pull2 := _pull(2, 0))
    pull2.matches_properties = lambda text: False
    service.check_hold_request()  # the periodic check knows no properties: growth alone wakes it
    service.notify_message_arriving("T", 0, 3)
    assert await asyncio.wait_for(woken.get(), 2) == 2
    await service.shutdown()


async def test_a_woken_pull_is_answered_inside_the_arrival_and_its_failure_stays_there() -> None:
    service, woken = await _service({})
    service.suspend_pull_request(_pull(1, 0))
    service.notify_message_arriving("T", 0, 1)
    assert woken.get_nowait() == 1, "answered before notify_message_arriving returned"

    def failing(conn: RemotingConnection, request: RemotingCommand) -> None:
        raise RuntimeError("store read failed")

    broken = PullRequestHoldService(failing, lambda t, q: 0, check_interval=3600)
    broken.suspend_pull_request(_pull(2, 0))
    broken.notify_message_arriving("T", 0, 1)  # the put that woke it goes on
    assert broken.held == 0
    await service.shutdown()
    await broken.shutdown()


async def test_store_arrivals_with_a_batch_entry_s_raw_properties_wake_a_selector_pull() -> None:
    service, woken = await _service({})
    _suspend_selector_pull(service)
    # The answer: whether pulls still wait on the queue (the store stops announcing a batch's
    # entries once none do).
    assert service.on_message_arriving("T", 1, 1, 0, 0, b"a\x017") is False  # another queue: nothing
    assert service.on_message_arriving("T", 0, 1, 0, 0, b"a\x011") is True
    assert service.held == 1
    # bytes, as a batch entry holds them
    assert service.on_message_arriving("T", 0, 2, 0, 0, b"b\x012\x02a\x017") is False
    assert await asyncio.wait_for(woken.get(), 2) == 1
    assert service.held == 0
    await service.shutdown()
