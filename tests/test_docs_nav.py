"""The site's navigation: the tutorial first, then how-to, reference, explanation; every page once.

Without an explicit ``nav`` MkDocs sorts the sections by name, and the site
opened on the explanations with the tutorial last.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML (a dependency of MkDocs) ships no types

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\((?P<target>[\w./-]+\.md)\)")


def nav() -> list[Any]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    entries: list[Any] = config["nav"]
    return entries


def section(title: str) -> list[str]:
    for entry in nav():
        if isinstance(entry, dict) and title in entry:
            pages: list[str] = entry[title]
            return pages
    raise AssertionError(f"no section {title!r}")


def test_the_parts_come_in_reading_order() -> None:
    titles = [next(iter(entry)) if isinstance(entry, dict) else entry for entry in nav()]
    assert titles == ["Home", "Tutorial", "How-to guides", "Reference", "Explanation"]
    assert section("Tutorial")[:2] == ["tutorial/index.md", "tutorial/agent.md"]


def test_each_part_lists_its_pages_in_the_order_of_its_index() -> None:
    for title, folder in [
        ("Tutorial", "tutorial"),
        ("How-to guides", "how-to"),
        ("Reference", "reference"),
        ("Explanation", "explanation"),
    ]:
        index = (DOCS / folder / "index.md").read_text(encoding="utf-8")
        linked: list[str] = []
        for match in LINK.finditer(index):
            page = f"{folder}/{match['target']}"
            if not match["target"].startswith("..") and page not in linked:
                linked.append(page)
        assert section(title) == [f"{folder}/index.md", *linked], title


def test_every_page_is_in_the_nav_once() -> None:
    listed: list[str] = []
    for entry in nav():
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        listed += value if isinstance(value, list) else [value]
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
