"""A bench/ script on the pure package and on the mypyc build, alternated, in one run.

Each round runs the script once under each build's Python (the pure order first in odd rounds, the
compiled first in even ones), so that the machine's drift falls on both alike; the script's own
daemons run under the same Python as its client. The builds are `make`'s two venvs: .venv (the
editable pure install) and .venv-mypyc (`make .venv-mypyc/.installed-mypyc`, the compiled wheel).

    .venv/bin/python bench/mypyc_ab.py [--rounds 3] [--script bench/broker_send.py] [-- script args]

Last line: one JSON object: the medians of every figure of the script's last line under each build
(``pure``, ``compiled``), and ``compiled_over_pure``, the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDS = {"pure": os.path.join(ROOT, ".venv", "bin", "python"),
          "compiled": os.path.join(ROOT, ".venv-mypyc", "bin", "python")}


def run_once(python: str, script: str, args: list[str], expect_compiled: bool) -> dict[str, float]:
    """The script's last line under ``python``, after checking which build that Python loads."""
    probe = subprocess.run([python, "-c", "import rocketmq_py; print(rocketmq_py.compiled())"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=True)
    if probe.stdout.strip() != str(expect_compiled):
        raise SystemExit(f"{python} does not load the {'compiled' if expect_compiled else 'pure'} build")
    out = subprocess.run([python, script, *args], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{script} under {python} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--script", default=os.path.join("bench", "broker_send.py"))
    parser.add_argument("args", nargs="*", help="the script's own arguments (after --)")
    ns = parser.parse_args()
    for python in BUILDS.values():
        if not os.path.exists(python):
            raise SystemExit(f"{python} missing: make .venv/.installed-dev-spark .venv-mypyc/.installed-mypyc")
    runs: dict[str, list[dict[str, float]]] = {"pure": [], "compiled": []}
    for rnd in range(ns.rounds):
        order = ["pure", "compiled"] if rnd % 2 == 0 else ["compiled", "pure"]
        for build in order:
            figures = run_once(BUILDS[build], ns.script, ns.args, build == "compiled")
            runs[build].append(figures)
            print(f"round {rnd + 1} {build:8s} {json.dumps(figures)}", flush=True)
    keys = [k for k, v in runs["pure"][0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    result: dict[str, object] = {"script": ns.script, "rounds": ns.rounds}
    for build, figures in runs.items():
        result[build] = {k: statistics.median(f[k] for f in figures) for k in keys}
    result["compiled_over_pure"] = {
        k: round(statistics.median(c[k] / p[k] for p, c in zip(runs["pure"], runs["compiled"], strict=True)), 3)
        for k in keys if all(p[k] for p in runs["pure"])}
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
