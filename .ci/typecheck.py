"""mypy over the package as it is installed, and over the tests.

pyproject.toml's package-dir maps folders (client/, broker/, ...) into ``rocketmq_py``; the
editable install reaches them through an import hook that mypy cannot follow, and mypy run over
the folders would name them ``client.x`` instead of ``rocketmq_py.client.x``. build/mypy holds a
tree of links laid out as the installed package, rebuilt on every run from the same mapping (a
folder added to package-dir is checked with no change here), and errors are reported under the
repository's own paths, the ones an editor opens. Settings are pyproject.toml's [tool.mypy].
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "mypy"


def build_tree() -> dict[str, str]:
    """Lays out build/mypy (setup.py's layout of the package, which mypyc compiles from too) with
    the tests beside it; returns each link's tree-relative path and the repository path it names."""
    spec = importlib.util.spec_from_file_location("rocketmq_py_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # setup() runs only as __main__
    links: dict[str, str] = setup.lay_out_package(TREE)
    (TREE / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    links["tests/"] = "tests/"
    return links


def main() -> int:
    os.chdir(ROOT)  # mypy_path and the cache are relative to the repository
    links = build_tree()
    # longest first: rocketmq_py/client/ before rocketmq_py/
    prefixes = sorted(links.items(), key=lambda kv: -len(kv[0]))
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), *sys.argv[1:]])
    tree = "build/mypy/"
    for line in stdout.splitlines():
        if line.startswith(tree):
            rest = line[len(tree) :]
            line = next((target + rest[len(link) :] for link, target in prefixes if rest.startswith(link)), line)
        print(line)
    sys.stderr.write(stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
