"""A plain script using the blocking facade's transactional producer (no event loop of its own).

Run by tests/integration/test_sync_facade.py: ``python sync_trans_script.py NAMESRV``. It prints
which thread each listener call ran in, each transaction's outcome, and what a consumer sees.
"""

import sys
import threading

from rocketmq_py.client import LocalTransactionState, Message
from rocketmq_py.client.sync import BlockingTransactionProducer
from tests.integration.sync_script import consume_from_first

DECISIONS = {b"commit-me": LocalTransactionState.COMMIT_MESSAGE,
             b"rollback-me": LocalTransactionState.ROLLBACK_MESSAGE,
             b"check-me": LocalTransactionState.UNKNOW}
checked = threading.Event()
check_threads: set[tuple[bool, bool]] = set()  # (in the main thread, on the SDK's loop) per check


class Listener:
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        print("EXECUTE", msg.body.decode(), arg, threading.current_thread() is threading.main_thread(), flush=True)
        if msg.body == b"raise-me":
            raise RuntimeError("local transaction failed")
        return DECISIONS[msg.body]

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        check_threads.add((threading.current_thread() is threading.main_thread(),
                           threading.current_thread().name == "rocketmq-py-loop"))
        checked.set()
        return LocalTransactionState.COMMIT_MESSAGE


namesrv = sys.argv[1]
with BlockingTransactionProducer("pg_sync_trans", namesrv, transaction_listener=Listener()) as producer:
    for body in (b"commit-me", b"rollback-me", b"check-me", b"raise-me"):
        result = producer.send_message_in_transaction(Message("SyncTrans", body), arg=f"arg-{body.decode()}")
        print("RESULT", body.decode(), result.send_status.value, result.local_transaction_state.value, flush=True)
    # check-me and raise-me were left UNKNOW: the broker asks back, and the answer commits them.
    print("CHECKED", checked.wait(30), sorted(check_threads), flush=True)

print("GOT", b",".join(consume_from_first("cg_sync_trans", namesrv, "SyncTrans", 3)).decode(), flush=True)
