"""The start-up heap frozen out of the cyclic GC (common/heap.py), by daemons and SDK clients.

Each case runs in a fresh interpreter: freezing is process-wide and happens once per process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return False


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
        from rocketmq_py.common import heap

        async def main():
            instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9", freeze_heap_at_start={flag},
                                                     keep_freed_heap_at_start={flag}), "c@1")
            assert gc.get_freeze_count() == 0 and heap._heap_kept is None
            await instance.start()
            print(gc.get_freeze_count() > 0, bool(heap._heap_kept))
            await instance.shutdown()

        asyncio.run(main())
    """
    assert _run(script.replace("{flag}", "True")) == ("True True" if _glibc() else "True False")
    assert _run(script.replace("{flag}", "False")) == "False False"


def test_a_daemon_freezes_after_its_start_and_before_its_boot_line() -> None:
    out = _run("""
        import asyncio, gc, os, signal
        from rocketmq_py.common import heap
        from rocketmq_py.common.daemon import serve_until_signalled

        seen = []

        class Controller:
            async def start(self):
                seen.append(("start", gc.get_freeze_count() > 0))
                seen.append(("kept", heap._heap_kept))

            async def shutdown(self):
                seen.append(("shutdown", gc.get_freeze_count() > 0))

        def boot():
            seen.append(("boot", gc.get_freeze_count() > 0))
            asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)
            return "test boot success"

        asyncio.run(serve_until_signalled(Controller(), None, "", boot))
        print(seen)
    """)
    kept = _glibc() and not any(name in os.environ for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
                                                                 "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"))
    assert out.splitlines()[-1] == f"[('start', False), ('kept', {kept}), ('boot', True), ('shutdown', True)]"


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


_CHURN = """
        import resource
        def churn():
            # As a broker answering pulls: eight 512 KiB blocks alive at once, all freed, again.
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for i in range(40):
                blocks = [b"%c" % (65 + j) * (512 * 1024) for j in range(8)]
                del blocks
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt")
def test_kept_freed_heap_is_reused_without_faulting_it_in_again() -> None:
    """40 rounds of 4 MiB allocated and freed: 40,960 pages. By glibc's defaults the heap's top
    is given back after each round and faulted in again (about a fault per page); kept, the
    rounds reuse it."""
    default = int(_run(_CHURN + """
        churn()  # the heap grown once
        print(churn())
    """))
    kept = _run(_CHURN + """
        from rocketmq_py.common.heap import keep_freed_heap
        first = keep_freed_heap()
        churn()
        print(first, keep_freed_heap(), churn())
    """).split()
    assert default > 20_000  # what is avoided: the test's pattern does provoke it here
    assert kept[:2] == ["True", "True"]
    assert int(kept[2]) < 1_000


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt")
def test_malloc_settings_of_the_users_environment_are_left_alone() -> None:
    out = subprocess.run([sys.executable, "-c", "from rocketmq_py.common.heap import keep_freed_heap; "
                          "print(keep_freed_heap())"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MALLOC_TRIM_THRESHOLD_": "131072"})
    assert out.stdout.strip() == "False", out.stderr
