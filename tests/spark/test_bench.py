"""bench/spark_read.py's JIT figure: the CPU of the threads named as HotSpot names its JIT compiler
threads, in a process and those under it, and of no other thread."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench",
                     "spark_read.py")
_SPEC = importlib.util.spec_from_file_location("spark_read_bench", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
spark_read = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(spark_read)

# A child whose threads take a name (as HotSpot's do, through prctl PR_SET_NAME) and burn CPU for
# a while each; it prints "ready" once both have burnt, then waits to be killed. A third thread
# of a compiler's name burns after the first reading only.
_CHILD = r"""
import ctypes, sys, threading, time
libc = ctypes.CDLL(None)
def burn(name, seconds, done):
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    done.set()
    time.sleep(60)  # alive (and counted) until the child is killed
events = []
for name, seconds in (("C2 CompilerThre", 0.6), ("Executor task l", 0.6)):
    done = threading.Event()
    events.append(done)
    threading.Thread(target=burn, args=(name, seconds, done), daemon=True).start()
for done in events:
    done.wait(30)
print("ready", flush=True)
sys.stdin.readline()
done = threading.Event()
threading.Thread(target=burn, args=("C1 CompilerThre", 0.3, done), daemon=True).start()
done.wait(30)
print("again", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_jit_figure_counts_compiler_threads_only_thread_by_thread() -> None:
    with subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            first = spark_read.jit_threads(child.pid)
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "again"
            since = spark_read.jit_seconds_since(first, child.pid)
        finally:
            child.kill()
    # 0.6 s of the compiler-named thread and none of the other one's 0.6 s (clock ticks of 10 ms);
    # then the new compiler thread's 0.3 s and nothing more of the first.
    assert len(first) == 1 and 0.5 <= sum(first.values()) <= 0.9, first
    assert 0.2 <= since <= 0.45, since
    assert spark_read.jit_threads(child.pid) == {}  # gone: nothing of it is read
