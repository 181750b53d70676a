"""Tool and parameter descriptions from a function's docstring: Google, NumPy or Sphinx style.

A tool needs two things from its docstring: the text that says what the tool
does (everything before the first section, cleaned of indentation), and one
description per parameter. This module reads exactly that and nothing more.

Why not griffe (the parser mkdocstrings uses, and the one some other agent
libraries depend on): it would be a runtime dependency for two strings, its
packaging moved between major versions (``griffe`` became ``griffelib``), and
it reports every parameter that lacks a type in the docstring through
``logging``, which for a tool whose types live in the signature is every
parameter. The three styles are regular enough that a small reader covers
what a tool author writes; the table in ``tests/agent/test_docstrings.py``
pins it.

The style is detected, not configured: a Sphinx field (``:param x:``), a
NumPy section underline (``Parameters`` then ``----------``) or a Google
section header (``Args:``) decides it, in that order of precedence.
"""

from __future__ import annotations

import inspect
import re
from typing import Final

import attrs

__all__ = ["ParsedDocstring", "parse_docstring"]

_GOOGLE_PARAMS: Final = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
_GOOGLE_SECTIONS: Final = frozenset(
    {
        *_GOOGLE_PARAMS,
        "returns",
        "return",
        "yields",
        "yield",
        "raises",
        "raise",
        "examples",
        "example",
        "note",
        "notes",
        "attributes",
        "see also",
        "warning",
        "warnings",
        "todo",
        "references",
        "other parameters",
    }
)
_NUMPY_PARAMS: Final = frozenset({"parameters", "other parameters", "keyword arguments"})
_SPHINX_FIELD: Final = re.compile(r"^:(\w+)(?:\s+([^:]*?))?:\s*(.*)$")
_GOOGLE_HEADER: Final = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
# "name (type): text", "name: text", "*name*: text"
_GOOGLE_ITEM: Final = re.compile(r"^\*{0,2}(\w+)\*{0,2}\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_UNDERLINE: Final = re.compile(r"^\s*-{3,}\s*$")


@attrs.frozen
class ParsedDocstring:
    """What a tool uses from a docstring: the *description* and *parameters* by name."""

    description: str | None
    parameters: dict[str, str]


def _join(lines: list[str]) -> str | None:
    text = inspect.cleandoc("\n".join(lines)).strip()
    return text or None


def _paragraph(lines: list[str]) -> str:
    """Lines of one parameter's description as one paragraph (blank lines kept as breaks)."""
    cleaned = inspect.cleandoc("\n".join(lines)).strip()
    parts = [" ".join(block.split()) for block in re.split(r"\n\s*\n", cleaned)]
    return "\n\n".join(part for part in parts if part)


def _sphinx(lines: list[str]) -> ParsedDocstring:
    summary: list[str] = []
    params: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_fields = False
    for line in lines:
        stripped = line.strip()
        match = _SPHINX_FIELD.match(stripped)
        if match:
            in_fields = True
            field, arg, text = match.groups()
            current = None
            if field in ("param", "parameter", "arg", "argument", "key", "keyword") and arg:
                name = arg.split()[-1]  # ":param str city:" names the type first
                current = params.setdefault(name, [])
                current.append(text)
            continue
        if in_fields:
            if current is not None and stripped:
                current.append(stripped)
            continue
        summary.append(line)
    return ParsedDocstring(_join(summary), {k: _paragraph(v) for k, v in params.items() if v})


def _numpy(lines: list[str]) -> ParsedDocstring:
    summary: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    current: list[str] | None = None
    item_indent = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.strip() and _UNDERLINE.match(following):
            section = line.strip().lower()
            current = None
            index += 2
            continue
        if section is None:
            summary.append(line)
        elif section in _NUMPY_PARAMS and line.strip():
            indent = len(line) - len(line.lstrip())
            if current is None or indent <= item_indent:
                # "city : str" or "city" opens an item; "a, b : int" opens two.
                item_indent = indent
                names = line.split(":", 1)[0]
                current = []
                for name in names.split(","):
                    key = name.strip().lstrip("*")
                    if key:
                        params[key] = current
            else:
                current.append(line)
        index += 1
    return ParsedDocstring(_join(summary), {k: _paragraph(v) for k, v in params.items() if v})


def _google(lines: list[str]) -> ParsedDocstring:
    summary: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    current: list[str] | None = None
    item_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        header = _GOOGLE_HEADER.match(line)
        if header and header.group(1).strip().lower() in _GOOGLE_SECTIONS:
            section = header.group(1).strip().lower()
            current = None
            item_indent = None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _GOOGLE_PARAMS or not stripped:
            if current is not None and not stripped:
                current.append("")
            continue
        indent = len(line) - len(line.lstrip())
        item = _GOOGLE_ITEM.match(stripped)
        if item and (item_indent is None or indent <= item_indent):
            item_indent = indent
            current = params.setdefault(item.group(1), [])
            current.append(item.group(3))
        elif current is not None:
            current.append(stripped)
    return ParsedDocstring(_join(summary), {k: _paragraph(v) for k, v in params.items() if v})


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Read the description and per-parameter descriptions from *doc*, whatever its style."""
    if not doc or not doc.strip():
        return ParsedDocstring(None, {})
    lines = inspect.cleandoc(doc).splitlines()
    if any(_SPHINX_FIELD.match(line.strip()) for line in lines):
        return _sphinx(lines)
    if any(_UNDERLINE.match(line) for line in lines[1:]):
        return _numpy(lines)
    return _google(lines)
