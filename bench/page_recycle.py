"""What new page cache costs, fresh or recycled: the store's largest cost per MiB on a VM.

Writes files of 1 MiB ``write`` calls (the page cache, no sync in the loop) two ways, alternated:
- ``fresh``: a new file beside the earlier ones, all kept cached (as a broker keeps its
  CommitLog): each page comes from the free memory, which a guest with free page reporting has
  handed back to its host, so the host backs it again at its first touch;
- ``recycled``: a new file while the same amount of an earlier, synced file is dropped from the
  page cache (``POSIX_FADV_DONTNEED``) MiB for MiB: the pages freed are taken again at once,
  before the guest reports them.

Figures: MiB/s of the loop and the kernel CPU per MiB (``getrusage``). Not a broker bench: it says
what `bench/scale.py`'s ``mb_1mib`` and the page warmer's CPU (docs/store-formats.md) are made of
on the machine it runs on. Last line: one JSON object (medians of the rounds).

    .venv/bin/python bench/page_recycle.py [--mib 1000] [--rounds 2] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import tempfile
import time

MIB = 1 << 20


def write(path: str, mib: int, drop: str | None = None) -> tuple[float, float]:
    """MiB/s and kernel ms per MiB of writing ``mib`` MiB to ``path``; while ``drop`` (a synced
    file) is given up from the page cache as much as is written."""
    block = b"\x00" * MIB
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    dfd = os.open(drop, os.O_RDONLY) if drop else None
    try:
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for i in range(mib):
            os.write(fd, block)
            if dfd is not None:
                os.posix_fadvise(dfd, i * MIB, MIB, os.POSIX_FADV_DONTNEED)
        elapsed, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        os.close(fd)
        if dfd is not None:
            os.close(dfd)
    return mib / elapsed, (r1.ru_stime - r0.ru_stime) * 1e3 / mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1000, help="MiB per file (default 1000)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    ns = parser.parse_args()
    home = tempfile.mkdtemp(prefix="page-recycle-", dir=ns.dir)
    need = ns.mib * MIB * (2 * ns.rounds + 1)
    if shutil.disk_usage(home).free < need * 1.2:
        shutil.rmtree(home)
        raise SystemExit(f"needs {need / 1e9:.1f} GB free beside {home}")
    fresh: list[tuple[float, float]] = []
    recycled: list[tuple[float, float]] = []
    try:
        earlier = os.path.join(home, "f0")
        write(earlier, ns.mib)  # the first file: what the first recycled round gives up
        os.sync()
        for rnd in range(ns.rounds):
            fresh.append(write(os.path.join(home, f"fresh{rnd}"), ns.mib))
            os.sync()
            kept = os.path.join(home, f"recycled{rnd}")
            recycled.append(write(kept, ns.mib, drop=earlier))
            os.sync()
            earlier = kept
            print(f"round {rnd + 1}: fresh {fresh[-1][0]:,.0f} MiB/s, {fresh[-1][1]:.2f} ms kernel CPU per MiB; "
                  f"recycled {recycled[-1][0]:,.0f} MiB/s, {recycled[-1][1]:.2f} ms per MiB", flush=True)
    finally:
        shutil.rmtree(home)
    out = {"fresh_mib_per_s": round(statistics.median(f[0] for f in fresh)),
           "fresh_sys_ms_per_mib": round(statistics.median(f[1] for f in fresh), 2),
           "recycled_mib_per_s": round(statistics.median(r[0] for r in recycled)),
           "recycled_sys_ms_per_mib": round(statistics.median(r[1] for r in recycled), 2)}
    out["recycled_over_fresh"] = round(out["recycled_mib_per_s"] / out["fresh_mib_per_s"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
