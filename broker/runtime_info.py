"""GET_BROKER_RUNTIME_INFO's table: every key Java 4.9.7's broker writes, from our broker's state.

Java builds it from three places (docs/admin-codes.md, runtime info): StoreStatsService's
counters and rates, DefaultMessageStore's disk and offset figures, and AdminBrokerProcessor's
``prepareRuntimeInfo`` (day totals, thread-pool queues, page-cache lock, earliest message).
``mqadmin clusterList`` reads ``putTps``, ``getTransferedTps``, the queue sizes and head waits,
``pageCacheLockTimeMills``, ``earliestMessageTimeStamp`` and ``commitLogDiskRatio`` without a
null check, so every key is always present, spelled as Java spells it, with a value of Java's form.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from typing import TYPE_CHECKING

from rocketmq_py.broker.stats import GET_FOUND, GET_MISS, GET_TRANSFERRED, PUT, format_runtime
from rocketmq_py.remoting.codes import CURRENT_VERSION
from rocketmq_py.remoting.processor import DEFAULT_MAX_CONCURRENCY
from rocketmq_py.store.config import SCHEDULE_TOPIC, MessageStoreConfig

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

BROKER_VERSION_DESC = "V4_9_8"  # MQVersion.getVersionDesc(CURRENT_VERSION)

# Java's TransientStorePool answers Integer.MAX_VALUE when the pool is off; ours is always off
# (writes go straight into the mapped file).
NO_TRANSIENT_POOL = 2**31 - 1

# The put-latency buckets of Java's putMessageDistributeTime, in its order.
PUT_DISTRIBUTE_BUCKETS = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
                          "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")


def human_readable_bytes(count: int) -> str:
    """Java's MixAll.humanReadableByteCount(bytes, false): binary units, one decimal."""
    if count < 1024:
        return f"{count} B"
    exp = int(math.log(count) / math.log(1024))
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def disk_used_ratio(path: str) -> float:
    """Used fraction of the partition holding ``path``, -1.0 when it does not exist (Java's
    UtilAll.getDiskPartitionSpaceUsedPercent: (total - free) / total)."""
    if not os.path.exists(path):
        return -1.0
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return usage.used / usage.total if usage.total else -1.0


def _store_runtime_info(broker: BrokerController) -> dict[str, str]:
    """StoreStatsService.getRuntimeInfo's keys.

    Our puts are not timed: a put is a synchronous in-process append of microseconds with no
    lock to wait for, so the millisecond figures Java takes per put (``putMessageEntireTimeMax``,
    ``getMessageEntireTimeMax``, ``putLatency99/999``, the distribution buckets) are reported as
    0, and ``dispatchMaxBuffer`` is 0 because queues are built inline with the put, not by a
    reput thread reading a buffer.
    """
    stats = broker.stats
    total = stats.put_messages or 1  # Java divides by it, and shows 1 for none
    return {
        "bootTimestamp": str(stats.boot_timestamp),
        "runtime": format_runtime(int(time.time() * 1000) - stats.boot_timestamp),
        "putMessageEntireTimeMax": "0",
        "putMessageTimesTotal": str(total),
        "putMessageFailedTimes": str(stats.put_failed_times),
        "putMessageSizeTotal": str(stats.put_bytes),
        "putMessageDistributeTime": "".join(f"{b}:0 " for b in PUT_DISTRIBUTE_BUCKETS),
        "putMessageAverageSize": repr(stats.put_bytes / total),
        "dispatchMaxBuffer": "0",
        "getMessageEntireTimeMax": "0",
        "putTps": stats.tps_text(PUT),
        "getFoundTps": stats.tps_text(GET_FOUND),
        "getMissTps": stats.tps_text(GET_MISS),
        "getTotalTps": stats.total_get_tps_text(),
        "getTransferedTps": stats.tps_text(GET_TRANSFERRED),
        "putLatency99": "0.00",
        "putLatency999": "0.00",
    }


def _message_store_runtime_info(broker: BrokerController) -> dict[str, str]:
    """DefaultMessageStore.getRuntimeInfo's own keys: disk use, delay-level progress, offsets."""
    store = broker.message_store
    config: MessageStoreConfig = broker.store_config
    info: dict[str, str] = {}
    commit_log_dir = config.commit_log_dir()
    root = config.storePathRootDir
    # Java creates both folders with the store; ours appear with the first message, so until
    # then the partition is measured where they will be (the store root).
    ratio = disk_used_ratio(commit_log_dir if os.path.exists(commit_log_dir) else root)
    info[f"commitLogDiskRatio_{commit_log_dir}"] = repr(ratio)
    info["commitLogDiskRatio"] = repr(ratio)
    queues_dir = os.path.join(root, "consumequeue")
    info["consumeQueueDiskRatio"] = repr(disk_used_ratio(queues_dir if os.path.exists(queues_dir) else root))
    schedule = broker.schedule_message_service
    for level, offset in sorted(schedule.offset_table.items()):
        # "delivered up to, stored up to" of each delay level's queue (ScheduleMessageService).
        max_offset = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
        info[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
    info["commitLogMinOffset"] = str(store.get_min_phy_offset())
    info["commitLogMaxOffset"] = str(store.get_max_phy_offset())
    return info


def earliest_message_time(broker: BrokerController) -> int:
    """Store time of the oldest record in the CommitLog, -1 when it holds none (Java's
    DefaultMessageStore.getEarliestMessageTime)."""
    store = broker.message_store
    # The store timestamp lies within a record's first 80 bytes (76 with an IPv6 born host).
    return store.commit_log.pickup_store_timestamp(store.get_min_phy_offset(), 80)


def dispatch_behind_bytes(broker: BrokerController) -> int:
    """CommitLog bytes not yet dispatched. Consume queues are written with each put, so only the
    index child can be behind (Java's reput builds both)."""
    dispatch = broker.message_store.index_dispatch
    if dispatch is None:
        return 0
    return max(broker.message_store.get_max_phy_offset() - dispatch.indexed_offset, 0)


def prepare_runtime_info(broker: BrokerController) -> dict[str, str]:
    """The whole table, as Java's AdminBrokerProcessor.prepareRuntimeInfo builds it.

    The thread-pool figures have no queue behind them here: a processor row runs a request at
    once or answers SYSTEM_BUSY when its concurrency limit is reached (remoting.processor), so
    nothing waits to start. The queue sizes and head-of-queue waits are therefore 0, and the
    capacities are the rows' limit, the bound at which Java's pools would turn requests away.
    ``pageCacheLockTimeMills`` (how long the current put has held the CommitLog lock) is 0 for
    the same reason: this answer runs on the event loop, so no put is under way while it does.
    """
    stats = broker.stats
    store = broker.message_store
    info = _store_runtime_info(broker)
    info.update(_message_store_runtime_info(broker))
    capacity = str(DEFAULT_MAX_CONCURRENCY)
    info.update({
        "brokerVersionDesc": BROKER_VERSION_DESC,
        "brokerVersion": str(CURRENT_VERSION),
        "msgPutTotalYesterdayMorning": str(stats.msg_put_total_yesterday_morning),
        "msgPutTotalTodayMorning": str(stats.msg_put_total_today_morning),
        "msgPutTotalTodayNow": str(stats.put_messages),
        "msgGetTotalYesterdayMorning": str(stats.msg_get_total_yesterday_morning),
        "msgGetTotalTodayMorning": str(stats.msg_get_total_today_morning),
        "msgGetTotalTodayNow": str(stats.get_messages),
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueCapacity": capacity,
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueCapacity": capacity,
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": capacity,
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": capacity,
        "dispatchBehindBytes": str(dispatch_behind_bytes(broker)),
        "pageCacheLockTimeMills": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "earliestMessageTimeStamp": str(earliest_message_time(broker)),
        # BrokerConfig.startAcceptSendRequestTimeStamp: sends before it are refused; Java's
        # default, 0, is the only value ours has (sends are accepted from start-up).
        "startAcceptSendRequestTimeStamp": "0",
        "remainTransientStoreBufferNumbs": str(NO_TRANSIENT_POOL),
        "remainHowManyDataToFlush": human_readable_bytes(
            max(store.get_max_phy_offset() - store.commit_log.queue.flushed_where, 0)),
        # rocketmq-py's addition (Java has no such key): the long polls PullRequestHoldService
        # holds now, so a caller can see a pull parked instead of guessing with a sleep.
        "pullRequestHoldCount": str(broker.pull_hold.held),
    })
    root = broker.store_config.storePathRootDir
    if os.path.exists(root):
        usage = shutil.disk_usage(root)
        info["commitLogDirCapacity"] = (f"Total : {human_readable_bytes(usage.total)}, "
                                        f"Free : {human_readable_bytes(usage.free)}.")
    return info
