"""The package list of the one import package, ``rocketmq_py`` (metadata is in pyproject.toml),
and the optional mypyc build of its hot modules.

pyproject.toml maps each top-level folder into ``rocketmq_py`` (``package-dir``); setuptools then
needs every subpackage named, which a static list would let drift as folders are added. They are
found here, from the same mapping.

The default build is pure Python: one ``py3-none-any`` wheel for every platform. With
``ROCKETMQ_PY_MYPYC=1`` the hot modules below (docs/hot-modules.md) are also compiled by mypyc
into C extensions beside their sources, as msgpack and aiokafka ship their Cython accelerators;
the package behaves the same either way and ``rocketmq_py.compiled()`` says which one is
loaded. mypy (which carries mypyc) is then a build requirement, and only then: a pure install
downloads nothing more than setuptools.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
PYPROJECT = tomllib.loads((HERE / "pyproject.toml").read_text())
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]

# The modules mypyc compiles: docs/hot-modules.md says why each is hot, and which are left out why.
MYPYC_MODULES = [
    "rocketmq_py.broker.processors.send_plain",
    "rocketmq_py.remoting.command",
    "rocketmq_py.remoting.connection",
    "rocketmq_py.remoting.frame",
    "rocketmq_py.remoting.protocol.batch_body",
    "rocketmq_py.remoting.serializer",
    "rocketmq_py.store.commit_log",
    "rocketmq_py.store.get_message",
    "rocketmq_py.store.message_result",
    "rocketmq_py.store.message_store",
]
# What mypyc's type check needs, as `make typecheck` has it: mypy as the dev extra pins it (mypyc
# compiles what that mypy accepts), its stubs, and the package's dependencies, whose types it reads
# (pydantic also for its mypy plugin).
MYPYC_REQUIREMENTS = [
    *PYPROJECT["project"]["dependencies"],
    *(r for r in PYPROJECT["project"]["optional-dependencies"]["dev"] if r.startswith(("mypy", "types-"))),
]


def _packages() -> list[str]:
    found = []
    for name, folder in PACKAGE_DIR.items():
        found.append(name)
        # conf/ is data only (no __init__.py; package-data takes its subfolders by glob)
        if name != "rocketmq_py" and (HERE / folder / "__init__.py").exists():
            found += [f"{name}.{sub}" for sub in find_packages(where=str(HERE / folder))]
    return sorted(found)


def lay_out_package(tree: Path) -> dict[str, str]:
    """Lays out ``tree`` as the installed package, in links to the repository's folders (from
    package-dir); returns each link's tree-relative path and the repository path it names.

    mypy names a module by the folders above its file, so it sees ``rocketmq_py.remoting.frame``
    only in a tree laid out as installed: .ci/typecheck.py checks this tree, and mypyc compiles
    from it (module names decide the extensions' names and where they are installed)."""
    shutil.rmtree(tree, ignore_errors=True)
    links: dict[str, str] = {}
    for name, folder in PACKAGE_DIR.items():
        parts = name.split(".")
        if len(parts) == 1:
            # the package's own folder: its files are linked one by one, its subpackages beside them
            for entry in (HERE / folder).iterdir():
                if entry.name != "__pycache__":
                    suffix = "/" if entry.is_dir() else ""
                    links[f"{name}/{entry.name}{suffix}"] = f"{folder}/{entry.name}{suffix}"
        else:
            links["/".join(parts) + "/"] = folder.rstrip("/") + "/"
    for link, target in links.items():
        path = tree / link.rstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(HERE.resolve() / target.rstrip("/"), target_is_directory=link.endswith("/"))
    return links


def _mypyc_options() -> dict[str, object]:
    """The mypyc build's setup() arguments, or none for the pure build."""
    if os.environ.get("ROCKETMQ_PY_MYPYC", "") in ("", "0"):
        return {}
    # A PEP 517 frontend first asks which requirements the build needs (setup_requires below),
    # running this file without them: mypyc is imported only once they are installed.
    try:
        from mypyc.build import mypycify
    except ImportError:
        return {"setup_requires": MYPYC_REQUIREMENTS}
    # build/mypy: the same tree and the same settings (pyproject's [tool.mypy]) as `make typecheck`
    os.chdir(HERE)
    lay_out_package(HERE / "build" / "mypy")
    paths = ["build/mypy/" + module.replace(".", "/") + ".py" for module in MYPYC_MODULES]
    return {
        # its own build folder: a pure wheel built after it must not pack its extensions from build/lib
        "options": {"build": {"build_base": "build/mypyc"}},
        "setup_requires": MYPYC_REQUIREMENTS,
        # group_name: mypyc's shared library is rocketmq_py/native__mypyc, not a name at the top level
        "ext_modules": mypycify(["--config-file", "pyproject.toml", *paths], group_name="rocketmq_py.native",
                                target_dir="build/mypyc/c"),
    }


if __name__ == "__main__":
    setup(packages=_packages(), **_mypyc_options())
