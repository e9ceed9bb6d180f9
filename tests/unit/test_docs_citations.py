"""Every docs/ page and section a comment cites exists, and the docs' own links resolve.

Comments name the RocketMQ behaviour they match by citing ``docs/<page>.md#<section>``; a
citation of a page that is not in the repository (or of a heading that was renamed) sends the
reader nowhere, as the ~60 citations of files outside the tree once did.
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
THIS = os.path.basename(__file__)  # its messages name the patterns it looks for
SKIP_DIRS = {".git", ".venv", ".venv-mypyc", "node_modules", "build", "dist", ".pytest_cache", ".ruff_cache"}

CITATION = re.compile(r"docs/([\w.-]+\.md)(?:#([\w-]+))?")
ANY_MD = re.compile(r"(?<![\w/.-])([\w-]+\.md)\b")
LINK = re.compile(r"\]\(([\w.-]+\.md)?(?:#([\w-]+))?\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than ``-`` and ``_`` dropped,
    spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: str) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    in_fence = False
    with open(os.path.join(DOCS, page), encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_fence = not in_fence
            if in_fence or not line.startswith("#"):
                continue
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def python_files() -> list[str]:
    found = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        found += [os.path.join(top, name) for name in files if name.endswith(".py") and name != THIS]
    return found


def test_slug_matches_githubs_rule() -> None:
    assert slug(" Delay levels") == "delay-levels"
    assert slug("ROCKETMQ binary header") == "rocketmq-binary-header"
    assert slug("Topics, queues and `perm`") == "topics-queues-and-perm"
    assert slug("Start-up and recovery") == "start-up-and-recovery"


def test_every_cited_docs_page_and_section_exists() -> None:
    pages = set(os.listdir(DOCS))
    missing: list[str] = []
    cited = 0
    for path in python_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        where = os.path.relpath(path, ROOT)
        for m in CITATION.finditer(text):
            cited += 1
            page, section = m.group(1), m.group(2)
            if page not in pages:
                missing.append(f"{where}: docs/{page} does not exist")
            elif section is not None and section not in anchors(page):
                missing.append(f"{where}: docs/{page} has no section #{section}")
        for m in ANY_MD.finditer(text):
            name = m.group(1)
            if name not in pages and not os.path.exists(os.path.join(ROOT, name)):
                missing.append(f"{where}: cites {name}, which is neither in docs/ nor at the top")
        if "§" in text:
            missing.append(f"{where}: cites a numbered section (§); cite docs/<page>.md#<heading> instead")
    assert cited >= 50, f"only {cited} citations found: is the pattern still right?"
    assert missing == []


def test_links_between_docs_pages_resolve() -> None:
    broken: list[str] = []
    for page in sorted(os.listdir(DOCS)):
        if not page.endswith(".md"):
            continue
        with open(os.path.join(DOCS, page), encoding="utf-8") as f:
            text = f.read()
        for m in LINK.finditer(text):
            target, section = m.group(1) or page, m.group(2)
            if not os.path.exists(os.path.join(DOCS, target)):
                broken.append(f"{page}: {target} does not exist")
            elif section is not None and section not in anchors(target):
                broken.append(f"{page}: {target} has no section #{section}")
    assert broken == []
