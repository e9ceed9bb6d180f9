"""Queue allocation strategies for clustering consumers (docs/behaviours.md#queue-allocation).

Each strategy is a pure function of (this client's id, all queues, all client ids). Every
consumer of a group computes it independently from the same sorted inputs, so the results must
match RocketMQ's Java strategies exactly: a Python consumer and a Java consumer in one group
would otherwise both take, or both skip, the same queue.
"""

from __future__ import annotations

import bisect
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import NamedTuple


class MessageQueue(NamedTuple):
    """Ordered as Java's MessageQueue.compareTo: topic, then broker name, then queue id."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:  # Java's toString, which consistent hashing hashes
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


class AllocateMessageQueueStrategy(ABC):
    name: str

    @abstractmethod
    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...

    @staticmethod
    def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
        """Java throws on empty inputs and returns nothing when this client is not listed."""
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all:
            raise ValueError("mqAll is null or mqAll empty")
        if not cid_all:
            raise ValueError("cidAll is null or cidAll empty")
        return current_cid in cid_all


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Contiguous blocks; the first ``m mod n`` clients get one queue more."""

    name = "AVG"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        m, n = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = m % n
        if m <= n:
            size = 1
        elif mod > 0 and index < mod:
            size = m // n + 1
        else:
            size = m // n
        start = index * size if mod > 0 and index < mod else index * size + mod
        take = min(size, m - start)
        return [mq_all[(start + k) % m] for k in range(max(0, take))]


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Round robin: queue j goes to client j mod n."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq for j, mq in enumerate(mq_all) if j % len(cid_all) == index]


def _md5_hash(key: str) -> int:
    # Java's ConsistentHashRouter default: the first 4 bytes of MD5, read as an unsigned number.
    digest = hashlib.md5(key.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """A hash ring with virtual nodes, so a client joining or leaving moves few queues."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_count: int = 10, hash_func: Callable[[str], int] = _md5_hash) -> None:
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_count}")
        self.virtual_node_count = virtual_node_count
        self.hash_func = hash_func

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for k in range(self.virtual_node_count):
                ring[self.hash_func(f"{cid}-{k}")] = cid
        points = sorted(ring)
        result = []
        for mq in mq_all:
            i = bisect.bisect_left(points, self.hash_func(str(mq)))
            owner = ring[points[i if i < len(points) else 0]]
            if owner == current_cid:
                result.append(mq)
        return result


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """A fixed list, whatever the other consumers do."""

    name = "CONFIG"

    def __init__(self, message_queue_list: Sequence[MessageQueue]) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(self.message_queue_list)


class AllocateMessageQueueByMachineRoom(AllocateMessageQueueStrategy):
    """Only queues of brokers named ``<room>@<name>`` in the consumer's rooms, split evenly."""

    name = "MACHINE_ROOM"

    def __init__(self, consumeridcs: set[str]) -> None:
        self.consumeridcs = set(consumeridcs)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        premq = [mq for mq in mq_all
                 if len(parts := mq.broker_name.split("@")) == 2 and parts[0] in self.consumeridcs]
        n = len(cid_all)
        mod, rem = len(premq) // n, len(premq) % n
        result = premq[index * mod:index * mod + mod]
        if index < rem:
            result.append(premq[mod * n + index])
        return result


STRATEGIES: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    AllocateMessageQueueAveragely.name: AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle.name: AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash.name: AllocateMessageQueueConsistentHash,
}


def strategy_from(spec: AllocateMessageQueueStrategy | str) -> AllocateMessageQueueStrategy:
    """A consumer's ``allocate_strategy`` option: a strategy object, or the name of one that
    needs no configuration (Java's getName(): AVG, AVG_BY_CIRCLE, CONSISTENT_HASH). CONFIG and
    MACHINE_ROOM need their queue list or rooms, so they must be passed as objects."""
    if isinstance(spec, AllocateMessageQueueStrategy):
        return spec
    factory = STRATEGIES.get(spec)
    if factory is None:
        needs = {AllocateMessageQueueByConfig.name: "AllocateMessageQueueByConfig(queues)",
                 AllocateMessageQueueByMachineRoom.name: "AllocateMessageQueueByMachineRoom(rooms)"}
        hint = f"; pass {needs[spec]}" if spec in needs else f"; known names: {', '.join(STRATEGIES)}"
        raise ValueError(f"unknown allocate strategy {spec!r}{hint}")
    return factory()
