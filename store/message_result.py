"""The store's answers: PutMessageStatus/PutMessageResult for puts, GetMessageStatus/GetMessageResult
for reads, and MessageFilter for the consume-queue tag match (Java's classes of those names).

Kept apart from DefaultMessageStore so processors and tools name a result without importing the
store that produces it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from rocketmq_py.store.commit_log import AppendMessageResult, AppendMessageStatus


class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    remark: str | None = None

    @property
    def ok(self) -> bool:
        """Stored (perhaps not yet flushed or replicated, as the status says)."""
        status = self.status
        # Identity tests: an Enum's __hash__ is Python code, and this runs for every put.
        return status is _PUT_OK or status in _STORED


_PUT_OK = PutMessageStatus.PUT_OK
_STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
                     PutMessageStatus.SLAVE_NOT_AVAILABLE})


def not_appended(result: AppendMessageResult) -> PutMessageResult:
    """The put's answer when the CommitLog refused the record (nothing was written)."""
    if result.status == AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED:
        return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, result,
                                "properties size exceeded 32767 bytes")
    if result.status == AppendMessageStatus.NUL_IN_PROPERTIES:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, result,
                                "properties contain a NUL byte, which the CommitLog cannot store: its recovery "
                                "reads NUL there as the unwritten tail of a torn record")
    if result.status == AppendMessageStatus.UNKNOWN_ERROR:
        # The broker refuses such values in the request header (Java's int and long ranges);
        # this is the store's own guard for its other callers.
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, result,
                                "a field does not fit the record: queue id, flag, sysFlag or reconsume times "
                                "beyond int32, or a timestamp or offset beyond int64")
    return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, result,
                            "message size exceeded: body over maxMessageSize or topic over 127 bytes")


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffers: list[bytes] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)


class MessageFilter:
    """Filters by the consume queue's tag code; None tags codes (e.g. ``*``) match all."""

    def __init__(self, codes: set[int] | None = None) -> None:
        self.codes = codes

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if not self.codes or tags_code is None:
            return True
        return tags_code in self.codes


MATCH_ALL = MessageFilter()
