"""The start-up heap frozen out of the cyclic GC (common/heap.py), by daemons and SDK clients.

Each case runs in a fresh interpreter: freezing is process-wide and happens once per process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_freeze_collects_first_then_freezes_once_and_later_cycles_are_still_collected() -> None:
    out = _run("""
        import gc, weakref
        from rocketmq_py.common.heap import freeze_startup_heap

        class Node:
            pass

        def cycle():
            a, b = Node(), Node()
            a.other, b.other = b, a
            return weakref.ref(a)

        gc.disable()  # only the collections asked for below
        before = cycle()              # garbage already when the freeze comes
        kept = Node(); kept.me = kept # alive at the freeze
        assert before() is not None
        first = freeze_startup_heap()
        frozen = gc.get_freeze_count()
        second = freeze_startup_heap()
        after = cycle()               # garbage made after the freeze
        gc.collect()
        print(first, second, frozen > 0, gc.get_freeze_count() == frozen, before() is None, after() is None,
              any(o is kept for o in gc.get_objects()))
    """)
    assert out == "True False True True True True False"


def test_a_client_instance_freezes_at_its_start_unless_told_not_to() -> None:
    script = """
        import asyncio, gc
        from rocketmq_py.client.instance import ClientConfig, MQClientInstance

        async def main():
            instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9", freeze_heap_at_start={flag}), "c@1")
            assert gc.get_freeze_count() == 0
            await instance.start()
            print(gc.get_freeze_count() > 0)
            await instance.shutdown()

        asyncio.run(main())
    """
    assert _run(script.replace("{flag}", "True")) == "True"
    assert _run(script.replace("{flag}", "False")) == "False"


def test_a_daemon_freezes_after_its_start_and_before_its_boot_line() -> None:
    out = _run("""
        import asyncio, gc, os, signal
        from rocketmq_py.common.daemon import serve_until_signalled

        seen = []

        class Controller:
            async def start(self):
                seen.append(("start", gc.get_freeze_count() > 0))

            async def shutdown(self):
                seen.append(("shutdown", gc.get_freeze_count() > 0))

        def boot():
            seen.append(("boot", gc.get_freeze_count() > 0))
            asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)
            return "test boot success"

        asyncio.run(serve_until_signalled(Controller(), None, "", boot))
        print(seen)
    """)
    assert out.splitlines()[-1] == "[('start', False), ('boot', True), ('shutdown', True)]"


def test_a_daemon_builds_every_header_codec_before_its_boot_line() -> None:
    """Not by its first requests, on the loop (docs/latency.md): every header class the daemon
    imported has its codec by the boot line, frozen with the start-up heap (the broker and the
    NameServer pass ``prepare_header_codecs`` as their start's ``prepare``)."""
    out = _run("""
        import asyncio, os, signal
        import rocketmq_py.broker.startup  # every header class a broker serves
        from rocketmq_py.common.daemon import serve_until_signalled
        from rocketmq_py.remoting.header import CommandHeader, prepare_header_codecs
        from rocketmq_py.remoting.protocol.broker import PullMessageResponseHeader

        def headers(cls):
            for sub in cls.__subclasses__():
                yield sub
                yield from headers(sub)

        seen = []

        class Controller:
            async def start(self):
                seen.append(("start", "_codec_cache" in PullMessageResponseHeader.__dict__))

            async def shutdown(self):
                pass

        def boot():
            built = [cls for cls in headers(CommandHeader) if "_codec_cache" in cls.__dict__]
            seen.append(("boot", len(built) == len(set(headers(CommandHeader))) > 40))
            asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)
            return "test boot success"

        asyncio.run(serve_until_signalled(Controller(), None, "", boot, prepare_header_codecs))
        print(seen)
    """)
    assert out.splitlines()[-1] == "[('start', False), ('boot', True)]"
    for startup in ("broker", "namesrv"):  # what the daemons pass
        source = (Path(__file__).parents[2] / startup / "startup.py").read_text()
        assert "serve_until_signalled(" in source and "prepare_header_codecs))" in source, startup
