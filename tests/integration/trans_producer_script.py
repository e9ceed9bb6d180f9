"""A transactional producer that sends one half message, leaves it UNKNOW and waits to be killed.

Run by tests/integration/test_transaction.py: ``python trans_producer_script.py NAMESRV TOPIC GROUP``.
It prints ``HALF <msgId> <queueId> <queueOffset>`` once the broker acknowledged the half message
and the local transaction returned UNKNOW; it answers any check with UNKNOW too. It exits by
itself after 60 s, so a test that fails to kill it leaves nothing behind for long.
"""

from __future__ import annotations

import asyncio
import sys

from rocketmq_py.client import LocalTransactionState, Message, TransactionProducer
from rocketmq_py.remoting.protocol.message import MessageExt


class Undecided:
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


async def main(namesrv: str, topic: str, group: str) -> None:
    producer = TransactionProducer(group, namesrv, transaction_listener=Undecided())
    await producer.start()
    result = await producer.send_message_in_transaction(Message(topic, b"from-the-dead"))
    print(f"HALF {result.msg_id} {result.message_queue.queue_id} {result.queue_offset}", flush=True)
    await asyncio.sleep(60)
    await producer.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
