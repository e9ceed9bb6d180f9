"""PullAPIWrapper: one PULL_MESSAGE to the broker node a queue is pulled from, and its answer read.

As Java's, it keeps per queue the broker id the last answer suggested (suggestWhichBrokerId, its
pullFromWhichNodeTable): a master sends a consumer that has fallen behind into what it no longer
holds in memory to its slave, and the slave sends it back once it has caught up.
"""

from __future__ import annotations

import logging

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.instance import MQClientInstance
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.protocol.broker import (
    FLAG_COMMIT_OFFSET,
    FLAG_LITE_PULL,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketmq_py.remoting.protocol.heartbeat import SubscriptionData
from rocketmq_py.remoting.protocol.message import MessageConst, MessageExt, RecordError, decode_records
from rocketmq_py.remoting.protocol.route import MASTER_ID

log = logging.getLogger("rocketmq.client")


def decode_pulled(body: bytes, mq: MessageQueue, offset: int) -> list[MessageExt]:
    """The records of a pull response up to the first one that does not decode.

    As in Java's ``MessageDecoder.decodes``, an undecodable record (say a flagged body that does
    not inflate) ends the batch instead of stopping the queue: it can never decode on a retry.
    """
    msgs: list[MessageExt] = []
    try:
        msgs.extend(decode_records(body, decompress=True))
    except RecordError as exc:
        log.error("undecodable record in %s after offset %d (%d decoded): %s", mq, offset, len(msgs), exc)
    return msgs


class PullAPIWrapper:
    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.pull_from_which_node_table: dict[MessageQueue, int] = {}

    async def pull_kernel_impl(self, mq: MessageQueue, sub: SubscriptionData, offset: int, max_nums: int,
                               commit_offset: int, suspend_timeout: float) -> RemotingCommand:
        """The broker's answer to one long-polling pull of ``mq`` from ``offset``."""
        instance = self.instance
        addr, slave = await instance.subscribe_addr(mq.topic, mq.broker_name,
                                                     self.pull_from_which_node_table.get(mq, MASTER_ID))
        header = PullMessageRequestHeader(
            consumerGroup=self.group, topic=mq.topic, queueId=mq.queue_id, queueOffset=offset,
            maxMsgNums=max_nums, commitOffset=max(commit_offset, 0),
            # A slave keeps no offsets a pull commits (Java clears the flag for it).
            sysFlag=FLAG_SUSPEND | FLAG_SUBSCRIPTION | FLAG_LITE_PULL | (
                FLAG_COMMIT_OFFSET if commit_offset > 0 and not slave else 0),
            suspendTimeoutMillis=int(suspend_timeout * 1000), subVersion=sub.subVersion,
            subscription=sub.subString, expressionType=sub.expressionType)
        return await instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header),
                                              suspend_timeout + 10)

    def process_pull_result(self, mq: MessageQueue, sub: SubscriptionData, r: RemotingCommand,
                            offset: int) -> list[MessageExt]:
        """The messages of a found answer that match the subscription's tags ([] for any other
        answer), noting the broker id the answer suggests for the queue's next pull."""
        suggested = (r.ext_fields or {}).get("suggestWhichBrokerId")
        if suggested is not None and suggested.lstrip("-").isdigit():
            self.pull_from_which_node_table[mq] = int(suggested)
        if r.code != ResponseCode.SUCCESS:
            return []
        msgs = decode_pulled(r.body or b"", mq, offset)
        if sub.tagsSet:
            msgs = [m for m in msgs if m.properties.get(MessageConst.TAGS) in sub.tagsSet]
        return msgs
