"""The documentation site builds strictly and every cross-reference in it is a link.

Builds the MkDocs site once into a temporary directory (``mkdocs build
--strict``, a few seconds) and scans the HTML for what a reader must never
see: a Sphinx role left as text, a Markdown reference that did not resolve, a
raw ``:param:`` field, a link into a private module path, or a link whose
anchor does not exist.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ROLE_LEFTOVER = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|exc|mod|obj|const):(?:<code>|`)")
UNRESOLVED_REF = re.compile(r"\]\[[A-Za-z_][\w.]*\]|<autoref\b")
RAW_FIELD = re.compile(r"(?m)(?:^|>)\s*:(?:param|type|returns?|rtype|raises?|ivar|var)\b[^:<]*:")
RST_LITERAL = re.compile(r"\S::</p>")
HREF = re.compile(r'<a [^>]*href="(?P<href>[^"]*)"')
IDS = re.compile(r'\bid="(?P<id>[^"]+)"')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # autorefs reports an unresolved reference as a warning; strict mode
    # aborts on it, but say so here in words if a plugin ever downgrades it.
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def pages(site: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(site.rglob("*.html")):
        if path.name == "404.html":
            continue
        yield str(path.relative_to(site)), path.read_text(encoding="utf-8")


def findings(site: Path, pattern: re.Pattern[str]) -> list[str]:
    found = []
    for name, text in pages(site):
        # The search index and the page's own <script> are not what a reader sees.
        body = re.sub(r"(?s)<script\b.*?</script>", "", text)
        found += [
            f"{name}: {html.unescape(body[max(0, m.start() - 60) : m.end() + 20])!r}"
            for m in pattern.finditer(body)
        ]
    return found


def test_no_sphinx_role_is_left_as_text(site: Path) -> None:
    assert findings(site, ROLE_LEFTOVER) == []


def test_every_markdown_reference_resolved(site: Path) -> None:
    assert findings(site, UNRESOLVED_REF) == []


def test_docstring_fields_render_as_tables_not_text(site: Path) -> None:
    assert findings(site, RAW_FIELD) == []
    schema = (site / "reference" / "schema" / "index.html").read_text(encoding="utf-8")
    # sanitize_tool_schema documents its parameters with :param: fields.
    assert "<th>Parameters" in schema or "Parameters:" in schema
    assert "<code>dialect</code>" in schema


def test_no_restructuredtext_literal_marker(site: Path) -> None:
    assert findings(site, RST_LITERAL) == []


def test_cross_references_use_public_paths_and_land_on_an_anchor(site: Path) -> None:
    ids: dict[str, set[str]] = {}
    for name, text in pages(site):
        ids[name] = {m["id"] for m in IDS.finditer(text)}
    private, broken = [], []
    autorefs = 0
    for name, text in pages(site):
        for match in re.finditer(r'<a class="autorefs autorefs-internal"[^>]*href="([^"]*)"', text):
            autorefs += 1
            href = html.unescape(match[1])
            page, _, anchor = href.partition("#")
            if re.search(r"\._", anchor):
                private.append(f"{name}: {href}")
            target = (
                os.path.normpath(os.path.join(os.path.dirname(name), page, "index.html"))
                if page and not page.endswith(".html")
                else os.path.normpath(os.path.join(os.path.dirname(name), page or "x"))
                if page
                else name
            )
            if anchor and anchor not in ids.get(target, set()):
                broken.append(f"{name}: {href} (looked in {target})")
    assert private == []
    assert broken == []
    # The docstrings cross-reference a lot; a build that linked nothing is broken.
    assert autorefs > 200


def test_docstring_conversion_has_nothing_left_to_do() -> None:
    """New Sphinx roles fail here first, with the command that fixes them."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "docs_autorefs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, (
        "Sphinx roles or '::' markers in docstrings; run `python tools/docs_autorefs.py`:\n"
        + proc.stdout
        + proc.stderr
    )


def test_docstrings_reference_public_paths() -> None:
    """A reference names the path a user imports, never a private module."""
    private = re.compile(r"\]\[juno_bind_trio(?:\.\w+)*\._\w+")
    found = [
        f"{path.relative_to(ROOT)}: {m[0]}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for m in private.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def _heading(site: Path, page: str, identifier: str) -> str:
    text = (site / "reference" / page / "index.html").read_text(encoding="utf-8")
    start = text.index(f'id="{identifier}"')
    return text[start : text.index("</h2>", start)]


def test_reference_says_what_is_awaited_and_what_is_entered(site: Path) -> None:
    entered = _heading(
        site, "providers-openai", "juno_bind_trio.providers.openai.open_openai_client"
    )
    assert "<code>async with</code>" in entered
    assert "<code>async</code>" not in entered
    awaited = _heading(
        site, "providers-openai", "juno_bind_trio.providers.openai.stream_chat_completion"
    )
    assert "<code>async</code>" in awaited
    server = _heading(site, "testing", "juno_bind_trio.testing.open_fake_openai_server")
    assert "<code>async with</code>" in server
