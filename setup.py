"""The package list of the one import package, ``rocketmq_py`` (metadata is in pyproject.toml).

pyproject.toml maps each top-level folder into ``rocketmq_py`` (``package-dir``); setuptools then
needs every subpackage named, which a static list would let drift as folders are added. They are
found here, from the same mapping.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((HERE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def _packages() -> list[str]:
    found = []
    for name, folder in PACKAGE_DIR.items():
        found.append(name)
        # conf/ is data only (no __init__.py; package-data takes its subfolders by glob)
        if name != "rocketmq_py" and (HERE / folder / "__init__.py").exists():
            found += [f"{name}.{sub}" for sub in find_packages(where=str(HERE / folder))]
    return sorted(found)


setup(packages=_packages())
