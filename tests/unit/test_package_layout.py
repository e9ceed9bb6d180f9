"""One import package: the code imports itself only as ``rocketmq_py``, never by a folder's bare name,
and each folder only from the layers below it.

The folders (``client/``, ``broker/``, ...) sit at the checkout's root, so inside the checkout a bare
``import client`` would still resolve and pass every test, then fail for a user whose own
``client.py`` shadows it (or whose install has no such top-level name). This reads every module's
imports and refuses those.

The layers are RocketMQ's modules: ``common`` (with ``srvutil``) at the bottom, here below the
protocol too, since the transport busy-polls and the listeners report a taken address through it;
``remoting``, the protocol only; ``acl``, its own module so that both daemons may check accounts;
``store``; then the NameServer, the broker and the client side by side, none importing another
(a NameServer that imported the broker's ACL went against this); the operator tools over the
client. Every import counts, those made only for type checking too.
"""

from __future__ import annotations

import ast
import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = {".venv", ".venv-mypyc", ".git", "node_modules", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache",
        ".hypothesis"}


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
    for folder in ("client", "broker", "store", "remoting", "common", "acl", "namesrv", "tools", "conf"):
        assert mapping[f"rocketmq_py.{folder}"] == folder
        assert os.path.isfile(os.path.join(ROOT, folder, "__init__.py")), folder
    assert os.path.isfile(os.path.join(ROOT, "rocketmq_py", "py.typed"))


def test_no_module_imports_a_folder_by_its_bare_name() -> None:
    files = _python_files()
    assert len(files) > 100  # the walk found the code, not an empty tree
    offenders = {os.path.relpath(p, ROOT): bad for p in files if (bad := _bare_imports(p))}
    assert offenders == {}, "import these as rocketmq_py.<folder>: " + repr(offenders)


# What each folder may import besides itself. rocketmq_py/ itself (mqstandalone) composes the
# daemons and may import anything.
LAYERS: dict[str, set[str]] = {
    "conf": set(),
    "common": {"conf"},
    "remoting": {"common", "conf"},
    "acl": {"remoting", "common", "conf"},
    "store": {"remoting", "common", "conf"},
    "namesrv": {"acl", "remoting", "common", "conf"},
    "broker": {"store", "acl", "remoting", "common", "conf"},
    "client": {"acl", "remoting", "common", "conf"},
    "tools": {"client", "acl", "remoting", "common", "conf"},
}
# Modules that left remoting/ (and broker/acl/) for common/ and acl/: no copy or re-export may
# come back under the old name.
MOVED = {
    "rocketmq_py.remoting.daemon": "common/daemon.py",
    "rocketmq_py.remoting.properties": "common/properties.py",
    "rocketmq_py.remoting.atomic_file": "common/atomic_file.py",
    "rocketmq_py.remoting.logsetup": "common/logsetup.py",
    "rocketmq_py.remoting.refusal_log": "common/refusal_log.py",
    "rocketmq_py.remoting.loop": "common/loop.py",
    "rocketmq_py.remoting.busy_poll": "common/busy_poll.py",
    "rocketmq_py.remoting.cli": "common/cli.py",
    "rocketmq_py.remoting.version": "common/version.py",
    "rocketmq_py.remoting.acl": "acl/acl_client_rpc_hook.py",
    "rocketmq_py.broker.acl": "acl/__init__.py",
}


def _package_imports(path: str) -> list[tuple[int, str]]:
    """(line, rocketmq_py.<folder>...) of every import of the package in ``path``."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("rocketmq_py.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "rocketmq_py":  # from rocketmq_py import broker
                found += [(node.lineno, f"rocketmq_py.{a.name}") for a in node.names]
            elif node.module.startswith("rocketmq_py."):
                found += [(node.lineno, node.module), *((node.lineno, f"{node.module}.{a.name}") for a in node.names)]
    return found


def _folder_files(folder: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
        dirnames[:] = [d for d in dirnames if d not in SKIP]
        found += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    return found


def test_every_folder_has_a_layer() -> None:
    folders = {folder for name, folder in _package_dir().items() if name != "rocketmq_py"}
    assert folders == set(LAYERS), "declare the new folder's layer in LAYERS"


def test_no_folder_imports_a_layer_above_it() -> None:
    package_dir = _package_dir()
    offenders: dict[str, list[str]] = {}
    checked = 0
    for name, folder in package_dir.items():
        if name == "rocketmq_py":
            continue
        allowed = LAYERS[folder] | {folder}
        for path in _folder_files(folder):
            checked += 1
            bad = [f"{line}: {module}" for line, module in _package_imports(path)
                   if module.split(".")[1] not in allowed]
            if bad:
                offenders[os.path.relpath(path, ROOT)] = bad
    assert checked > 100
    assert offenders == {}, "imports against the layering (LAYERS): " + repr(offenders)


def test_the_layering_check_sees_a_namesrv_importing_the_broker(tmp_path) -> None:
    """The check itself: a NameServer module importing the broker is reported, type-only or not."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from rocketmq_py.broker.config import BrokerConfig\n"
                     "from rocketmq_py import store\n")
    modules = [m for _, m in _package_imports(str(probe))]
    bad = [m for m in modules if m.split(".")[1] not in LAYERS["namesrv"] | {"namesrv"}]
    assert "rocketmq_py.broker.config" in bad and "rocketmq_py.store" in bad


def test_moved_modules_live_only_under_their_new_names() -> None:
    for old, new in MOVED.items():
        assert os.path.isfile(os.path.join(ROOT, new)), new
        parts = old.split(".")[1:]
        stale = os.path.join(ROOT, *parts)
        assert not os.path.exists(stale + ".py") and not os.path.exists(stale), f"{old} is back: import {new}"
    offenders = {os.path.relpath(p, ROOT): bad for p in _python_files()
                 if (bad := [f"{line}: {m}" for line, m in _package_imports(p)
                             if any(m == old or m.startswith(old + ".") for old in MOVED)])}
    assert offenders == {}, "these modules moved (MOVED): " + repr(offenders)
