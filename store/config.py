"""MessageStoreConfig: RocketMQ 4.9.8's store settings by name (docs/store-formats.md#store-settings).

Sizes can be made small so tests roll files; everything else keeps Java's defaults.
"""

from __future__ import annotations

import os
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

# ScheduleMessageService's units for messageDelayLevel items ("1s", "2m", "1h", "1d").
_DELAY_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# SCHEDULE_TOPIC_XXXX (TopicValidator.RMQ_SYS_SCHEDULE_TOPIC): delayed messages wait in its
# queue ``level - 1``; the store writes their delivery time in the consume-queue tag field.
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def parse_delay_levels(text: str) -> dict[int, int]:
    """Level (1-based) -> delay in ms; ValueError names the first item that is not ``<int><s|m|h|d>``."""
    table = {}
    for level, item in enumerate(text.split(), start=1):
        unit = _DELAY_UNITS_MS.get(item[-1:])
        if unit is None or not item[:-1].isdigit():
            raise ValueError(f"messageDelayLevel item {item!r} is not a number followed by s, m, h or d")
        table[level] = int(item[:-1]) * unit
    if not table:
        raise ValueError("messageDelayLevel is empty")
    return table


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class MessageStoreConfig(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    storePathRootDir: str = Field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    storePathCommitLog: str | None = None  # default: <root>/commitlog
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300000 * 20
    flushDiskType: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    # The next CommitLog file is always created ahead, sparse (no disk used until written);
    # warming allocates, zero-writes and syncs it so puts never fault on a fresh page (at the
    # price of writing each file twice).
    warmMapedFileEnable: bool = False
    # This project's: bytes past the CommitLog's write position that a thread keeps faulted in
    # (store/prefault.py), so puts do not pay first-touch page faults in the event loop; 0: off.
    # Wider than what is in flight at once: 8 sends of 1 MiB arrive in one read, and the pages
    # a 4 MiB window had not reached were faulted in by the loop (bench/scale.py mb_1mib).
    warmAheadCommitLog: int = Field(default=32 * 1024 * 1024, ge=0)
    # This project's: how many threads populate that window side by side (store/prefault.py): two
    # keep ahead of 1 MiB sends where one is overtaken.
    warmCommitLogThreads: int = Field(default=2, ge=1)
    brokerRole: BrokerRole = BrokerRole.ASYNC_MASTER
    # Replication (docs/ha.md). The broker's startup sets haListenPort to listenPort + 1, as
    # Java's BrokerStartup does, whatever the config says.
    haListenPort: int = 10912
    haSendHeartbeatInterval: int = 1000 * 5
    haHousekeepingInterval: int = 1000 * 20
    haTransferBatchSize: int = 1024 * 32
    haMasterAddress: str | None = None
    # A SYNC_MASTER answers SLAVE_NOT_AVAILABLE while its slave is this far behind (Java's name
    # for what the issue calls haMaxGapNotInSync).
    haSlaveFallbehindMax: int = 1024 * 1024 * 256
    # How long a SYNC_MASTER's send waits for the slave before FLUSH_SLAVE_TIMEOUT (4.9.7 waits
    # slaveTimeout, not syncFlushTimeout).
    slaveTimeout: int = 3000
    # A pull reading data older than this share of RAM behind the log's end is suggested to a
    # slave when slaveReadEnable is on.
    accessMessageInMemoryMaxRatio: int = 40
    flushIntervalCommitLog: int = 500
    flushCommitLogLeastPages: int = 4
    flushCommitLogThoroughInterval: int = 10000
    syncFlushTimeout: int = 5000
    flushIntervalConsumeQueue: int = 1000
    flushConsumeQueueLeastPages: int = 2
    flushConsumeQueueThoroughInterval: int = 60000
    fileReservedTime: int = 72  # hours
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    # Java reads these two from system properties (rocketmq.broker.diskSpace*Ratio).
    diskSpaceWarningLevelRatio: float = 0.90
    diskSpaceCleanForciblyRatio: float = 0.85
    cleanFileForciblyEnable: bool = True
    cleanResourceInterval: int = 10000
    deleteCommitLogFilesInterval: int = 100
    maxMessageSize: int = 1024 * 1024 * 4
    checkCRCOnRecover: bool = True
    messageIndexEnable: bool = True
    messageIndexSafe: bool = False
    # Python's stand-in for Java's reput thread: the index is built by a child process, in
    # parallel with puts (queries wait for it to catch up). False builds it inline on each put.
    messageIndexInChildProcess: bool = True
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 5000000 * 4
    maxTransferBytesOnMessageInMemory: int = 1024 * 256
    maxTransferCountOnMessageInMemory: int = 32
    defaultQueryMaxNum: int = 32
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flushDelayOffsetInterval: int = 10000

    @field_validator("messageDelayLevel")
    @classmethod
    def _check_delay_levels(cls, value: str) -> str:
        parse_delay_levels(value)
        return value

    def commit_log_dir(self) -> str:
        return self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")
