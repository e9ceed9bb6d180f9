"""MessageStoreConfig: RocketMQ 4.9.8's store settings by name (store-formats.md §8).

Sizes can be made small so tests roll files; everything else keeps Java's defaults.
"""

from __future__ import annotations

import os
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


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
    brokerRole: BrokerRole = BrokerRole.ASYNC_MASTER
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

    def commit_log_dir(self) -> str:
        return self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")
