"""Every module imports where POSIX-only modules do not exist (Windows), so the SDK runs there and
on macOS, and the daemons say at run time which of their features is POSIX-only.

A fresh interpreter is told ``fcntl``, ``resource`` and ``termios`` cannot be imported, and loses
the Linux-only ``os.sched_getaffinity`` and the POSIX-only ``os.sched_yield``; it then imports every
module of the package and runs a store, whose index is then built in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POSIX_ONLY = ("fcntl", "resource", "termios")


def _module_names() -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        package_dir: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    names = []
    for package, folder in package_dir.items():
        base = os.path.join(ROOT, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if os.path.isfile(os.path.join(dirpath, d, "__init__.py"))]
            rel = os.path.relpath(dirpath, base)
            prefix = package if rel == "." else f"{package}.{rel.replace(os.sep, '.')}"
            names += [prefix if fn == "__init__.py" else f"{prefix}.{fn[:-3]}" for fn in filenames
                      if fn.endswith(".py") and fn != "__main__.py"]  # __main__ runs a CLI when imported
    return sorted(set(names))


SCRIPT = textwrap.dedent('''
    import asyncio, importlib, logging, os, sys, tempfile

    for name in {posix_only!r}:
        sys.modules[name] = None  # "import fcntl" now raises ImportError, as on Windows
    for attr in ("sched_getaffinity", "sched_yield"):
        if hasattr(os, attr):
            delattr(os, attr)

    for name in {modules!r}:
        importlib.import_module(name)
    assert not any(sys.modules.get(n) for n in {posix_only!r})

    from rocketmq_py.common.busy_poll import busy_poller
    from rocketmq_py.store import index_dispatch
    from rocketmq_py.store.message_store import DefaultMessageStore
    from tests.store_helpers import message, small_config

    assert index_dispatch.CHILD_SUPPORTED is False

    async def main() -> None:
        assert (busy_poller(200) is not None) == ((os.cpu_count() or 1) > 1)
        with tempfile.TemporaryDirectory() as root:
            store = DefaultMessageStore(small_config(root))
            await store.load()
            await store.start()
            try:
                assert store.index_dispatch is None  # no child: the index is built in this process
                await store.put_message(message("T", b"portable", keys="k1"))
                found = await store.query_message("T", "k1", 8, 0, 2**62)
                assert len(found) == 1, found
            finally:
                await store.shutdown()
        print("ok", len({modules!r}))

    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(levelname)s %(message)s")
    asyncio.run(main())
''')


def test_every_module_imports_and_the_store_runs_without_posix_only_modules() -> None:
    modules = _module_names()
    assert "rocketmq_py.client.producer" in modules and "rocketmq_py.store.index_dispatch" in modules
    assert "rocketmq_py.standalone" in modules and len(modules) > 100
    script = SCRIPT.format(posix_only=POSIX_ONLY, modules=modules)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr + out.stdout
    assert f"ok {len(modules)}" in out.stdout
    # the features that need POSIX say so when they are skipped
    assert "messageIndexInChildProcess is POSIX-only" in out.stdout
    assert "the store lock is POSIX-only" in out.stdout
