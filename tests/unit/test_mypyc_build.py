"""The build under test is the one asked for: `make test` runs the suite on the pure package (.venv)
and again on the mypyc build (.venv-mypyc, with ROCKETMQ_PY_MYPYC=1 in its environment); a compiled
run that silently loaded the Python sources would test nothing of the compiled build."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
from pathlib import Path

import rocketmq_py

ROOT = Path(__file__).resolve().parents[2]


def _mypyc_modules() -> list[str]:
    spec = importlib.util.spec_from_file_location("rocketmq_py_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # setup() runs only as __main__
    modules: list[str] = setup.MYPYC_MODULES
    return modules


def test_the_hot_modules_are_compiled_exactly_in_the_mypyc_build() -> None:
    compiled = os.environ.get("ROCKETMQ_PY_MYPYC", "") not in ("", "0")
    assert rocketmq_py.compiled() is compiled
    modules = _mypyc_modules()
    assert "rocketmq_py.remoting.frame" in modules
    for name in modules:
        origin = importlib.import_module(name).__file__ or ""
        assert origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) is compiled, (name, origin)
        assert origin.endswith(".py") is not compiled, (name, origin)


def test_the_compiled_modules_are_the_hot_modules_the_docs_name() -> None:
    listed = (ROOT / "docs" / "hot-modules.md").read_text()
    for name in _mypyc_modules():
        path = name.removeprefix("rocketmq_py.").replace(".", "/") + ".py"
        assert f"`{path}`" in listed, f"{path} is compiled but docs/hot-modules.md does not list it"
