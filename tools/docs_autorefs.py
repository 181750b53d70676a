"""Turn Sphinx roles in the package's docstrings into Markdown cross-references.

mkdocstrings renders docstrings as Markdown and leaves a Sphinx role such as
``:class:`~juno_bind_trio.loop.ToolLoop``` as raw text. This script rewrites
every role in ``src/juno_bind_trio`` into the autorefs form that becomes a
link in the built site, always naming the *public* path of the target (the
subpackage that exports it), for example::

    [`ToolLoop`][juno_bind_trio.loop.ToolLoop]

A role whose target the reference does not render (a private helper, a
member without a docstring, something outside this package) becomes plain
code, or a link to the rendered class that owns the member. It also turns the
reStructuredText literal-block marker ``::`` at the end of a line into ``:``
(the indented block after it is already a Markdown code block), and re-wraps a
paragraph line that grew past the line-length limit.

Run it again after merging: it changes nothing when nothing is left to do.

    python tools/docs_autorefs.py          # rewrite in place
    python tools/docs_autorefs.py --check  # exit 1 if anything would change
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = "juno_bind_trio"
LINE_LENGTH = 100


# The public modules the reference renders (a `::: module` line in
# docs/reference/), the top level first: the exception tree is documented
# there, everything else at the subpackage that exports it.
def _rendered_modules() -> list[str]:
    found = [
        line[4:].strip()
        for page in sorted((ROOT / "docs" / "reference").glob("*.md"))
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("::: ")
    ]
    return sorted(set(found), key=lambda name: (name != PACKAGE, name))


PUBLIC_MODULES = _rendered_modules()

ROLE = re.compile(
    r":(?:py:)?(?P<kind>class|meth|func|data|attr|exc|mod|obj|const|type):"
    r"`(?P<body>[^`]+)`"
)
CALLABLE_KINDS = {"meth", "func"}


class Resolver:
    """Find the public, rendered path of a role's target."""

    def __init__(self) -> None:
        loader = griffe.GriffeLoader(search_paths=[str(SRC)])
        self.package = loader.load(PACKAGE)
        loader.resolve_aliases(implicit=True, external=False)
        # canonical path -> public path, and short name -> public paths
        self.public: dict[str, str] = {}
        self.by_name: dict[str, set[str]] = {}
        for module_path in PUBLIC_MODULES:
            module = self.get(module_path)
            assert module is not None, module_path
            for name in module.exports or ():
                name = name if isinstance(name, str) else name.name
                member = module.members.get(name)
                if member is None:
                    continue
                canonical = self.canonical(member)
                public = f"{module_path}.{name}"
                self.public.setdefault(canonical, public)
                self.by_name.setdefault(name, set()).add(self.public[canonical])

    def get(self, path: str) -> Any:
        if path == PACKAGE:
            return self.package
        if not path.startswith(PACKAGE + "."):
            return None
        try:
            return self.package[path[len(PACKAGE) + 1 :]]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None

    @staticmethod
    def canonical(obj: Any) -> str:
        try:
            return str(obj.canonical_path)
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return str(obj.target_path)

    def to_public(self, canonical: str) -> str | None:
        """The public spelling of *canonical*: the longest exported prefix."""
        parts = canonical.split(".")
        for cut in range(len(parts), 0, -1):
            head = ".".join(parts[:cut])
            if head in self.public:
                return ".".join([self.public[head], *parts[cut:]])
            if head in PUBLIC_MODULES:
                return canonical
        return None

    def rendered(self, public: str) -> bool:
        obj = self.get(public)
        if obj is None:
            return False
        try:
            if obj.is_module:
                return public in PUBLIC_MODULES
            return bool(obj.docstring)
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return False

    def lookup(self, target: str, scopes: list[Any]) -> str | None:
        """The canonical path of *target* as seen from the innermost scope."""
        if target == PACKAGE or target.startswith(PACKAGE + "."):
            obj = self.get(target)
            return self.canonical(obj) if obj is not None else None
        head, _, rest = target.partition(".")
        for scope in reversed(scopes):
            member = scope.members.get(head)
            if member is None:
                continue
            try:
                obj = member[rest] if rest else member
            except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                if member.is_alias and not str(member.target_path).startswith(PACKAGE):
                    return str(member.target_path) + ("." + rest if rest else "")
                continue
            return self.canonical(obj)
        candidates = self.by_name.get(head, set())
        if len(candidates) == 1:
            (public,) = candidates
            return self.lookup(public + ("." + rest if rest else ""), [])
        if len(candidates) > 1:
            # Re-exported under several names: all are the same object.
            canon = {self.canonical(self.get(c)) for c in candidates}
            if len(canon) == 1:
                (only,) = canon
                return only + ("." + rest if rest else "")
        return None

    def replace(self, match: re.Match[str], scopes: list[Any]) -> str:
        kind, body = match["kind"], match["body"].strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", body)
        if explicit:
            title, target = explicit["title"], explicit["target"]
        else:
            target = body
            title = None
        short = target.startswith("~")
        target = target.lstrip("~").lstrip(".")
        if title is None:
            title = target.rsplit(".", 1)[-1] if short else target
            if kind in CALLABLE_KINDS:
                title += "()"
        text = f"`{title}`"
        canonical = self.lookup(target, scopes)
        public = self.to_public(canonical) if canonical else None
        if public is None:
            return text
        if self.rendered(public):
            return f"[{text}][{public}]"
        # A member the reference does not render: link its rendered owner.
        owner = public.rsplit(".", 1)[0]
        if owner != public and self.rendered(owner) and self.get(owner).is_class:
            return f"[{text}][{owner}]"
        return text


def docstrings(tree: ast.Module) -> Iterator[tuple[ast.Constant, list[str]]]:
    """Every string statement (docstrings and attribute docstrings) with its class chain."""

    def walk(node: ast.AST, classes: list[str]) -> Iterator[tuple[ast.Constant, list[str]]]:
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.Expr)
                and isinstance(child.value, ast.Constant)
                and isinstance(child.value.value, str)
            ):
                yield child.value, classes
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, [*classes, child.name])
            elif isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.If | ast.Try | ast.With
            ):
                yield from walk(child, classes)

    yield from walk(tree, [])


def _replace(match: re.Match[str], *, resolver: Resolver, scopes: list[Any]) -> str:
    return resolver.replace(match, scopes)


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


LIST_OR_FIELD = re.compile(r"\s*(?:[-*+] |\d+\. |:[a-z]+[^:]*:|```|>)")


def rewrap(lines: list[str]) -> list[str]:
    """Fold the overflow of a too-long prose line into the next line of its paragraph."""
    out = list(lines)
    i = 0
    while i < len(out):
        line = out[i]
        if len(line) <= LINE_LENGTH or line.strip().startswith("```"):
            i += 1
            continue
        cut = _break_at(line)
        if cut is None:
            i += 1
            continue
        head, tail = line[:cut].rstrip(), line[cut:].strip()
        indent = _continuation_indent(out, i)
        nxt = out[i + 1] if i + 1 < len(out) else ""
        same_paragraph = (
            nxt.strip()
            and not LIST_OR_FIELD.match(nxt)
            and len(nxt) - len(nxt.lstrip()) == len(indent)
            and not nxt.rstrip().endswith('"""')
        )
        out[i] = head
        if same_paragraph:
            out[i + 1] = indent + tail + " " + nxt.strip()
        else:
            out.insert(i + 1, indent + tail)
        i += 1
    return out


def _break_at(line: str) -> int | None:
    """The last space before the limit that is outside code spans and links."""
    depth_code = False
    depth_link = 0
    best = None
    indent = len(line) - len(line.lstrip())
    for pos, ch in enumerate(line):
        if ch == "`":
            depth_code = not depth_code
        elif not depth_code and ch == "[":
            depth_link += 1
        elif not depth_code and ch == "]":
            depth_link = max(0, depth_link - 1)
        elif ch == " " and pos > indent and not depth_code and depth_link == 0:
            if line[pos + 1 : pos + 2] == "[" and line[pos - 1] == "]":
                continue  # never split "][" pairs (they have no space anyway)
            if pos <= LINE_LENGTH:
                best = pos
            elif best is None:
                best = pos
                break
            else:
                break
    return best


def _continuation_indent(lines: list[str], i: int) -> str:
    line = lines[i]
    base = line[: len(line) - len(line.lstrip())]
    marker = LIST_OR_FIELD.match(line)
    if marker and not line.lstrip().startswith(("```", ">")):
        # A list item or a field: continue under its text (fields: four more).
        stripped = line.lstrip()
        if stripped.startswith(":"):
            return base + "    "
        return base + " " * (len(marker.group(0)) - len(base))
    return base


def convert_source(text: str, resolver: Resolver, module: str) -> str:
    tree = ast.parse(text)
    module_obj = resolver.get(module)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    for const, classes in docstrings(tree):
        scopes: list[Any] = [module_obj] if module_obj is not None else []
        for name in classes:
            parent = scopes[-1] if scopes else None
            child = parent.members.get(name) if parent is not None else None
            if child is None:
                break
            scopes.append(child)
        start, end = const.lineno - 1, (const.end_lineno or const.lineno) - 1
        block = "".join(lines[start : end + 1])
        new = ROLE.sub(functools.partial(_replace, resolver=resolver, scopes=scopes), block)
        new = re.sub(r"(?m)(\S)::[ \t]*$", r"\1:", new)
        new = re.sub(r"(?m)^([ \t]*)::[ \t]*\n", "", new)
        if new == block:
            continue
        new_lines = rewrap(new.splitlines())
        edits.append((start, end, [ln + "\n" for ln in new_lines]))
    for start, end, new_lines in reversed(edits):
        if not original_ends_with_newline(lines[end]):
            new_lines[-1] = new_lines[-1].rstrip("\n")
        lines[start : end + 1] = new_lines
    return "".join(lines)


def original_ends_with_newline(line: str) -> bool:
    return line.endswith("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if needed")
    parser.add_argument("paths", nargs="*", type=Path, help="files (default: the whole package)")
    args = parser.parse_args(argv)
    resolver = Resolver()
    paths = args.paths or sorted((SRC / PACKAGE).rglob("*.py"))
    changed = []
    for path in paths:
        path = path.resolve()
        text = path.read_text()
        new = convert_source(text, resolver, module_name(path))
        if new != text:
            changed.append(path)
            if not args.check:
                path.write_text(new)
    for path in changed:
        print(f"{'would rewrite' if args.check else 'rewrote'} {path.relative_to(ROOT)}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
