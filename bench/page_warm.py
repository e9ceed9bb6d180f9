"""What a CommitLog page warmer's call costs the CPU it runs on (store/prefault.py), populating
straight away (``populate``) against reading ahead first (``readahead_first``).

A new file (its blocks reserved, as the CommitLog reserves them; the files before it left in the
page cache, as a broker leaves its CommitLog) is warmed 1 MiB at a time by the
warmer's own ``_populate``, on this thread, once each way per round, the ways' order rotated.
Each call's CPU time (``time.thread_time``) is what any thread queued on that CPU waited: the
populate does not give its CPU up while the kernel allocates. Printed: per way, the median, mean,
99th percentile and largest CPU time of a 1 MiB call, and how many calls per GiB took over 5 ms.

    .venv/bin/python bench/page_warm.py [--rounds 3] [--mib 256] [--dir DIR]

Linux 5.14 or later (MADV_POPULATE_WRITE). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from rocketmq_py.store.mapped_file import MappedFile, create_reserved
from rocketmq_py.store.prefault import MADV_POPULATE_WRITE, PageWarmer

MiB = 1 << 20
WAYS = ("populate", "readahead_first")


def warm_file(directory: str, mib: int, way: str) -> list[float]:
    """Milliseconds of CPU of each 1 MiB call warming a new file of ``mib`` MiB ``way``."""
    path = os.path.join(directory, f"{time.monotonic_ns():020d}")
    size = mib * MiB
    create_reserved(path, size, size)
    mf = MappedFile(path, size)
    warmer = PageWarmer(size, MADV_POPULATE_WRITE)
    fd = os.open(path, os.O_RDONLY) if way == "readahead_first" else None
    costs = []
    try:
        for pos in range(0, size, MiB):
            cpu = time.thread_time()
            warmer._populate(mf, pos, pos + MiB, fd)
            costs.append((time.thread_time() - cpu) * 1e3)
    finally:
        if fd is not None:
            os.close(fd)
        mf.close()  # the file stays, cached, as a broker's CommitLog does: later allocations find memory as full
    return costs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mib", type=int, default=256, help="size of each file warmed")
    ap.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    args = ap.parse_args()
    if not PageWarmer(MiB, MADV_POPULATE_WRITE).enabled:
        raise SystemExit("this kernel has no MADV_POPULATE_WRITE")
    costs: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for round_no in range(args.rounds):
            turn = round_no % len(WAYS)
            for way in WAYS[turn:] + WAYS[:turn]:
                run = warm_file(directory, args.mib, way)
                costs[way] += run
                print(f"round {round_no + 1} {way:16s} median {statistics.median(run):.2f} ms/MiB, "
                      f"mean {statistics.mean(run):.2f}, max {max(run):.2f}, "
                      f"over 5 ms {sum(c > 5 for c in run)} of {len(run)}", flush=True)
    figures: dict[str, float] = {}
    for way, run in costs.items():
        run.sort()
        figures[f"{way}_cpu_ms_per_mib"] = round(statistics.median(run), 3)
        figures[f"{way}_mean_ms_per_mib"] = round(statistics.mean(run), 3)
        figures[f"{way}_p99_ms"] = round(run[int(len(run) * 0.99)], 2)
        figures[f"{way}_max_ms"] = round(run[-1], 2)
        figures[f"{way}_over_5ms_per_gib"] = round(sum(c > 5 for c in run) * 1024 / len(run), 1)
    figures["load_1m"] = os.getloadavg()[0]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
