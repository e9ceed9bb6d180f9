"""One import package: the code imports itself only as ``rocketmq_py``, never by a folder's bare name.

The folders (``client/``, ``broker/``, ...) sit at the checkout's root, so inside the checkout a bare
``import client`` would still resolve and pass every test, then fail for a user whose own
``client.py`` shadows it (or whose install has no such top-level name). This reads every module's
imports and refuses those.
"""

from __future__ import annotations

import ast
import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = {".venv", ".git", "node_modules", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def _package_dir() -> dict[str, str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-dir"]


BARE = {folder for name, folder in _package_dir().items() if name != "rocketmq_py"} | {"mqstandalone", "common"}


def _python_files() -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP and not d.endswith(".egg-info")]
        found += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    return found


def _bare_imports(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in BARE]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in BARE:
                bad.append(f"{node.lineno}: from {node.module} import ...")
    return bad


def test_every_folder_of_the_design_card_is_mapped_into_rocketmq_py() -> None:
    mapping = _package_dir()
    for folder in ("client", "broker", "store", "remoting", "namesrv", "tools", "conf"):
        assert mapping[f"rocketmq_py.{folder}"] == folder
        assert os.path.isfile(os.path.join(ROOT, folder, "__init__.py")), folder
    assert os.path.isfile(os.path.join(ROOT, "rocketmq_py", "py.typed"))


def test_no_module_imports_a_folder_by_its_bare_name() -> None:
    files = _python_files()
    assert len(files) > 100  # the walk found the code, not an empty tree
    offenders = {os.path.relpath(p, ROOT): bad for p in files if (bad := _bare_imports(p))}
    assert offenders == {}, "import these as rocketmq_py.<folder>: " + repr(offenders)
