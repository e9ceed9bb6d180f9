"""mypy over the package as it is installed, and over the tests.

pyproject.toml's package-dir maps folders (client/, broker/, ...) into ``rocketmq_py``; the
editable install reaches them through an import hook that mypy cannot follow, and mypy run over
the folders would name them ``client.x`` instead of ``rocketmq_py.client.x``. build/mypy holds a
tree of links laid out as the installed package, rebuilt on every run from the same mapping (a
folder added to package-dir is checked with no change here), and errors are reported under the
repository's own paths, the ones an editor opens. Settings are pyproject.toml's [tool.mypy].
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "mypy"


def build_tree() -> dict[str, str]:
    """Lays out build/mypy; returns each link's tree-relative path and the repository path it names."""
    package_dir: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    shutil.rmtree(TREE, ignore_errors=True)
    links: dict[str, str] = {"tests/": "tests/"}
    for name, folder in package_dir.items():
        parts = name.split(".")
        if len(parts) == 1:
            # the package's own folder: its files are linked one by one, its subpackages beside them
            for entry in (ROOT / folder).iterdir():
                if entry.name != "__pycache__":
                    links[f"{name}/{entry.name}" + ("/" if entry.is_dir() else "")] = f"{folder}/{entry.name}" + (
                        "/" if entry.is_dir() else ""
                    )
        else:
            links["/".join(parts) + "/"] = folder.rstrip("/") + "/"
    for link, target in links.items():
        path = TREE / link.rstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(ROOT / target.rstrip("/"), target_is_directory=link.endswith("/"))
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
