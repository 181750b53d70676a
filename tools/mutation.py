"""Mutation testing of the core modules: does the suite notice when the code is wrong?

Each mutant is one small, deliberate bug made in the module's syntax tree:

* ``delete``: a statement replaced by ``pass``;
* ``negate``: the condition of an ``if`` / ``while`` / conditional expression
  replaced by its negation;
* ``jump``: ``continue`` and ``break`` swapped;
* ``compare``: ``==``/``!=``, ``<``/``<=``, ``>``/``>=``, ``is``/``is not``,
  ``in``/``not in`` swapped;
* ``boolop``: ``and`` and ``or`` swapped;
* ``constant``: ``True``/``False`` swapped, an integer ``n`` made ``n + 1``;
* ``augassign``: ``+=`` made ``-=``.

Docstrings, ``__repr__`` (and attrs' ``repr=`` and ``init=``), ``__all__``,
``TYPE_CHECKING`` blocks and lines marked
``pragma: no cover`` are not mutated. Every mutant is written into a private
copy of the package and judged by the tests that cover its module, on both
anyio backends (``-x``: the first failing test kills it), in a child process
forked from a parent that has imported pytest and the third-party libraries
but never the package: the package and the tests are imported fresh for each
mutant. A mutant that makes the tests time out counts as killed.

A mutant's id says where it is without a line number, so that it survives
edits elsewhere in the module: ``<qualname>:<kind>:<snippet>#<n>``, the
function (or class, or ``<module>``) it is in, the kind of bug, the first
line of the source it changes (60 characters at most), and which occurrence
of that same (qualname, kind, snippet) it is, counting from 0 in source
order. ``ToolBatch._work:delete:await checkpoint_if_cancelled()#1`` is the
second deleted ``await checkpoint_if_cancelled()`` in ``ToolBatch._work``.
An id changes only when its own function changes around it.

Survivors listed in ``EQUIVALENT`` were read and judged to be the same
program (their reason is kept next to them); the score is killed out of all
mutants that are not equivalent. ``--stale`` lists the ``EQUIVALENT`` ids
that no longer name a mutant (the code they judged was edited: re-judge
it). ``docs/explanation/testing.md`` records the last run.

    python tools/mutation.py                       # every module
    python tools/mutation.py --module run/_pool.py # one
    python tools/mutation.py --list                # the mutants, without running them
    python tools/mutation.py --stale               # EQUIVALENT ids that name no mutant now
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Module (under src/juno_bind_trio) -> the tests that judge its mutants.
MODULES: dict[str, list[str]] = {
    "run/_pool.py": [
        "tests/run/test_pool.py",
        "tests/run/test_pool_hardening.py",
        "tests/run/test_pool_properties.py",
    ],
    "completion/_text_stream.py": [
        "tests/completion/test_text_stream.py",
        "tests/completion/test_text_gaps.py",
        "tests/completion/test_sinks.py",
    ],
    "completion/_text_view.py": [
        "tests/completion/test_text_view.py",
        "tests/completion/test_text_gaps.py",
    ],
    "transcript/_heal.py": ["tests/transcript"],
    # The quick, pointed tests first: with -x, most mutants die in the first file.
    "loop/_loop.py": [
        "tests/loop/test_loop.py",
        "tests/loop/test_cancellation.py",
        "tests/loop/test_hardening.py",
        "tests/loop/test_gaps.py",
        "tests/loop/test_observers.py",
        "tests/loop/test_values.py",
        "tests/loop/test_example.py",
        "tests/loop/test_soak.py",
        "tests/loop/test_properties.py",
        "tests/loop/test_native_cancel_sweep.py",
    ],
}

# Survivors judged equivalent after reading them: mutant id -> why.
EQUIVALENT: dict[str, str] = {
    "run/_pool.py:_raise_bad_ids:constant:True#0": (
        "zip(strict=False) over two lists of the same length"
    ),
    "run/_pool.py:ToolBatch.__attrs_post_init__:delete:"
    "if type(call) is dict and call.get('type', 'function') == 'f#0": (
        "without the inlined fast path every call goes through read_tool_call, "
        "which reads the same three strings (only slower)"
    ),
    "run/_pool.py:ToolBatch.__attrs_post_init__:delete:if type(function) is dict:#0": (
        "as above: the fast path's guard"
    ),
    "run/_pool.py:ToolBatch.__attrs_post_init__:delete:"
    "if type(call_id) is str and type(name) is str and (type(func#0": (
        "as above: the fast path's guard"
    ),
    "run/_pool.py:ToolBatch.run:delete:return []#0": (
        "an empty batch then opens a task group with no workers and returns the empty list"
    ),
    "run/_pool.py:ToolBatch.run:compare0:'queued' in states#0": (
        "the sweep settles nothing that is settled already, and a call still queued at a "
        "normal exit implies one still running (the worker that held it died)"
    ),
    "run/_pool.py:ToolBatch._work:delete:await checkpoint_if_cancelled()#1": (
        "the next claim's checkpoint, or the task group's exit, raises the same cancellation"
    ),
    "run/_pool.py:ToolBatch._work:delete:raise#0": (
        "the next statement raises the same exception (a cancellation is never foreign)"
    ),
    "completion/_text_view.py:TurnTextView:constant:1#1": (
        "the newest epoch then starts at -2 instead of -1; epochs start at 0"
    ),
    "completion/_text_view.py:TurnTextView.text:delete:self._parts = [joined]#0": (
        "it only compacts the parts list; the joined text is cached either way"
    ),
    "completion/_text_stream.py:_check_max_resets:negate:math.isfinite(value)#0": (
        "repr() and str() of a float or a bool are the same text"
    ),
    "transcript/_heal.py:HealChange:constant:True#0": (
        "kw_only=False lets HealChange take positional arguments too; nobody passes any"
    ),
    "transcript/_heal.py:HealResult:constant:True#0": (
        "kw_only=False lets HealResult take positional arguments too; nobody passes any"
    ),
    "transcript/_heal.py:_read_messages:delete:if type(message) is dict:#0": (
        "without the inlined fast path every message goes through _read_message, "
        "which reads the same fields and checks them in full"
    ),
    "transcript/_heal.py:_read_messages:delete:"
    "if type(role) is str and role in _SPOKEN and (role != 'assis#0": (
        "as above: the fast path's guard"
    ),
    "transcript/_heal.py:_read_message:delete:if set(map(type, ids)) <= {str}:#0": (
        "as above: the fast path's guard"
    ),
    "transcript/_heal.py:_read_message:delete:return _SPOKEN[role]#0": (
        "a message that is not the assistant's then falls through and may be read with "
        "call ids, but the healer reads the call ids of assistant messages only"
    ),
    "loop/_loop.py:ToolLoop._run_serially:delete:open_batch.running = None#1": (
        "the call is answered by _settle on the next line (before a fatal error is "
        "raised), and `running` is only read for a call that has no answer"
    ),
    "loop/_loop.py:ToolLoop._run_serially:delete:open_batch.running = None#2": (
        "as above: both settles that follow answer the call"
    ),
    "loop/_loop.py:ToolLoop._call_tool_in_own_task:delete:open_batch.running = None#1": (
        "as above: the _settle on the next line answers the call"
    ),
}

_SWAP_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_dunder_all(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
    )


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


class _Points:
    """Walks a module in a fixed order and yields every mutation point.

    Each point is (node, kind, detail, qualname): *qualname* names the
    function or class the point is in (``<module>`` at the top level).
    """

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()
        self.scope: list[str] = []

    def _skipped(self, node: ast.AST) -> bool:
        line = getattr(node, "lineno", None)
        return line is not None and "pragma: no cover" in self.lines[line - 1]

    def walk(self, tree: ast.AST) -> Iterator[tuple[ast.AST, str, ast.AST, str]]:
        for node, kind, detail in self._visit(tree):
            yield node, kind, detail, ".".join(self.scope) or "<module>"

    def _visit(self, node: ast.AST) -> Iterator[tuple[ast.AST, str, ast.AST]]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__repr__":
            return
        if _is_type_checking(node) or self._skipped(node):
            return
        if isinstance(node, ast.keyword) and node.arg in ("repr", "init"):
            # What a repr shows is not behaviour; attrs' init= only says whether
            # the constructor takes a keyword for a private field nobody passes.
            return
        if _is_dunder_all(node):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # Everything in it, its own statements included, is named by it.
            self.scope.append(node.name)
            try:
                yield from self._visit_inside(node)
            finally:
                self.scope.pop()
            return
        yield from self._visit_inside(node)

    def _visit_inside(self, node: ast.AST) -> Iterator[tuple[ast.AST, str, ast.AST]]:
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                for stmt in body:
                    if (
                        isinstance(stmt, ast.stmt)
                        and not _is_docstring(stmt)
                        and not isinstance(
                            stmt,
                            (
                                ast.FunctionDef,
                                ast.AsyncFunctionDef,
                                ast.ClassDef,
                                ast.Import,
                                ast.ImportFrom,
                                ast.Pass,
                            ),
                        )
                        and not _is_type_checking(stmt)
                        and not self._skipped(stmt)
                        and not _is_dunder_all(stmt)
                    ):
                        yield stmt, "delete", stmt
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not (
            isinstance(node.test, ast.Constant) and node.test.value is True
        ):
            yield node, "negate", node.test
        if isinstance(node, (ast.Continue, ast.Break)):
            yield node, "jump", node
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _SWAP_COMPARE:
                    yield node, f"compare{i}", node
        if isinstance(node, ast.BoolOp):
            yield node, "boolop", node
        if isinstance(node, ast.Constant) and (
            isinstance(node.value, bool)
            or (isinstance(node.value, int) and not isinstance(node.value, bool))
        ):
            yield node, "constant", node
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            yield node, "augassign", node
        for child in ast.iter_child_nodes(node):
            if _is_docstring_node(node, child):
                continue
            yield from self._visit(child)


def _is_docstring_node(parent: ast.AST, child: ast.AST) -> bool:
    body = getattr(parent, "body", None)
    return (
        isinstance(body, list)
        and bool(body)
        and body[0] is child
        and isinstance(child, ast.stmt)
        and _is_docstring(child)
    )


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, kind: str) -> None:
        self.target = target
        self.kind = kind

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and self.kind == "delete":
                for i, stmt in enumerate(body):
                    if stmt is self.target:
                        body[i] = ast.copy_location(ast.Pass(), stmt)
        if node is self.target:
            return self._mutate(node)
        return super().generic_visit(node)

    def _mutate(self, node: Any) -> ast.AST:
        kind = self.kind
        if kind == "negate":
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
        elif kind == "jump":
            return ast.copy_location(
                ast.Break() if isinstance(node, ast.Continue) else ast.Continue(), node
            )
        elif kind.startswith("compare"):
            i = int(kind.removeprefix("compare"))
            node.ops[i] = _SWAP_COMPARE[type(node.ops[i])]()
        elif kind == "boolop":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif kind == "constant":
            node.value = (not node.value) if isinstance(node.value, bool) else node.value + 1
        elif kind == "augassign":
            node.op = ast.Sub()
        mutated: ast.AST = node
        return mutated


def mutants(path: Path) -> list[tuple[str, str]]:
    """Every mutant of the module at *path*: (id, mutated source)."""
    source = path.read_text()
    points = list(_Points(source).walk(ast.parse(source)))
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    # Each point's id: where it is, and its rank among the points that share that
    # "where", in source order. Numbered before the duplicate check below, so an
    # id does not depend on whether another mutant happened to make the same program.
    wheres = [
        f"{qualname}:{kind}:{ast.unparse(detail).splitlines()[0][:60]}"
        for _, kind, detail, qualname in points
    ]
    positions: dict[str, list[tuple[int, int, int]]] = {}
    for index, ((node, _, _, _), where) in enumerate(zip(points, wheres, strict=True)):
        place = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0), index)
        positions.setdefault(where, []).append(place)
    rank = {place[2]: n for places in positions.values() for n, place in enumerate(sorted(places))}
    for index, where in enumerate(wheres):
        mutant_id = f"{where}#{rank[index]}"
        # A fresh tree per mutant, and the point found again in it by position.
        tree = ast.parse(source)
        node, kind, _, _ = next(itertools.islice(_Points(source).walk(tree), index, None))
        mutated = _Replace(node, kind).visit(tree)
        ast.fix_missing_locations(mutated)
        text = ast.unparse(mutated)
        if text in seen:
            continue
        seen.add(text)
        found.append((mutant_id, text))
    return found


def stale_equivalents(modules: list[str]) -> list[str]:
    """The ``EQUIVALENT`` ids of *modules* that name no mutant of the code as it is."""
    stale: list[str] = []
    for module in modules:
        current = {
            f"{module}:{mutant_id}" for mutant_id, _ in mutants(SRC / "juno_bind_trio" / module)
        }
        stale += [m for m in EQUIVALENT if m.startswith(f"{module}:") and m not in current]
    return stale


def run_tests(tree: Path, tests: list[str], timeout: float) -> str:
    """Judge the package copy at *tree* by *tests* in a child process; the verdict.

    The child is forked from this process, which has imported the test
    tooling and the third-party libraries but never the package itself: the
    package (and every test module) is imported fresh in each child, and
    nothing a mutant does outlives it. Forking saves the half second of
    imports per mutant that a new interpreter would spend.
    """
    pid = os.fork()
    if pid == 0:  # the child
        code = 3
        try:
            os.environ["JUNO_SOAK_RUNS"] = "100"
            sys.path.insert(0, str(tree))
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(ROOT)
            import pytest

            # The plugins were imported before pytest could mark them for assertion
            # rewriting; that warning is expected here, not an error. -n 0: in this
            # child, on the mutated copy (an xdist worker would import the package fresh).
            ignore = "ignore::pytest.PytestAssertRewriteWarning"
            options = ["-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-W", ignore]
            code = int(pytest.main([*options, *tests]))
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.05)


def _preload() -> None:
    """Import what every child needs, except the package under test."""
    import anyio  # noqa: F401
    import attrs  # noqa: F401
    import hypothesis  # noqa: F401
    import outcome  # noqa: F401
    import pytest  # noqa: F401
    import trio
    import trio.testing  # noqa: F401

    assert "juno_bind_trio" not in sys.modules


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES))
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--every", type=int, default=1, help="judge every Nth mutant only")
    parser.add_argument(
        "--trust-baseline",
        action="store_true",
        help="skip the check that the unmutated module passes (it sets the timeout too)",
    )
    parser.add_argument(
        "--only", action="append", help="judge only mutants whose id starts with this (repeatable)"
    )
    parser.add_argument(
        "--stale", action="store_true", help="list EQUIVALENT ids that name no mutant now, and stop"
    )
    args = parser.parse_args()
    chosen = args.module or list(MODULES)
    if args.stale:
        stale = stale_equivalents(chosen)
        for mutant in stale:
            print(mutant)
        return 1 if stale else 0
    _preload()

    results: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="juno-mutants-") as tmp:
        tree = Path(tmp) / "src"
        shutil.copytree(SRC / "juno_bind_trio", tree / "juno_bind_trio")
        for module in chosen:
            path = SRC / "juno_bind_trio" / module
            found = mutants(path)[:: args.every]
            if args.only:
                found = [m for m in found if any(m[0].startswith(o) for o in args.only)]
            print(f"{module}: {len(found)} mutants", flush=True)
            if args.list:
                for mutant_id, _ in found:
                    print(f"  {mutant_id}")
                continue
            target = tree / "juno_bind_trio" / module
            original = path.read_text()
            started = time.monotonic()
            baseline = "survived" if args.trust_baseline else run_tests(tree, MODULES[module], 900)
            if baseline != "survived":
                print(f"  the unmutated module fails its tests ({baseline}); skipped")
                continue
            budget = 900.0 if args.trust_baseline else max(60.0, 3 * (time.monotonic() - started))
            outcome: dict[str, str] = {}
            for n, (mutant_id, text) in enumerate(found, 1):
                target.write_text(text)
                verdict = run_tests(tree, MODULES[module], timeout=budget)
                outcome[mutant_id] = verdict
                note = " (equivalent)" if f"{module}:{mutant_id}" in EQUIVALENT else ""
                print(f"  [{n}/{len(found)}] {verdict.upper()} {mutant_id}{note}", flush=True)
            target.write_text(original)
            results[module] = outcome
    if args.list:
        return 0

    total_killed = total_judged = 0
    for module, outcome in results.items():
        survived = [m for m, v in outcome.items() if v == "survived"]
        equivalent = [m for m in survived if f"{module}:{m}" in EQUIVALENT]
        killed = len(outcome) - len(survived)
        judged = len(outcome) - len(equivalent)
        total_killed += killed
        total_judged += judged
        score = 100.0 * killed / judged if judged else 100.0
        print(
            f"{module}: {len(outcome)} mutants, {killed} killed, {len(equivalent)} equivalent, "
            f"{len(survived) - len(equivalent)} surviving: {score:.1f}% of non-equivalent killed"
        )
    if total_judged:
        print(f"total: {100.0 * total_killed / total_judged:.1f}% of non-equivalent mutants killed")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
