"""Which build of the package runs: the pure-Python one, or the one whose hot modules mypyc compiled
(setup.py's ``ROCKETMQ_PY_MYPYC=1``). Both behave alike; a daemon says which at start, since a
benchmark figure or a profile means little without it."""

from __future__ import annotations

import importlib.util


def compiled() -> bool:
    """Whether the hot modules run compiled by mypyc rather than from their Python source.

    Read from where the import system finds ``remoting/command.py``'s module (an extension or the
    source), without importing it: this layer sits below remoting/."""
    spec = importlib.util.find_spec("rocketmq_py.remoting.command")
    return spec is not None and not (spec.origin or "").endswith(".py")


def build_name() -> str:
    """The build as a daemon's start-up log line names it."""
    return "compiled by mypyc" if compiled() else "pure Python"
