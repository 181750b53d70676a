"""The modules issue #27 split stay split: under 600 lines, their purpose said in one sentence."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import juno_bind_trio

PACKAGE = Path(juno_bind_trio.__file__).resolve().parent
SPLIT = [
    "_errors.py",
    "agent/_agent.py",
    "agent/_approvals.py",
    "agent/_output_modes.py",
    "agent/_run.py",
    "agent/_tool.py",
    "loop/_loop.py",
    "mcp/_toolset.py",
    "store/_core.py",
    "store/_durable.py",
    "store/_store.py",
    "web/_runs.py",
    # and what came out of them
    "_errors_base.py",
    "agent/_agent_args.py",
    "agent/_agent_runs.py",
    "agent/_approval_decisions.py",
    "agent/_approval_placeholders.py",
    "agent/_handle.py",
    "agent/_instructions.py",
    "agent/_output_build.py",
    "agent/_output_members.py",
    "agent/_output_plan.py",
    "agent/_pipe.py",
    "agent/_reask.py",
    "agent/_session.py",
    "agent/_store_session.py",
    "agent/_tool_function.py",
    "agent/_tool_nulls.py",
    "agent/_tool_report.py",
    "agent/_tool_signature.py",
    "mcp/_connect.py",
    "store/_codec.py",
    "store/_guarded.py",
    "store/_lane.py",
    "store/_lease.py",
    "store/_protocol.py",
    "store/_resume.py",
    "web/_live_run.py",
    "providers/google/_wire.py",
]


@pytest.mark.parametrize("module", SPLIT)
def test_the_module_is_small_and_says_what_it_is_for_in_one_sentence(module: str) -> None:
    source = (PACKAGE / module).read_text(encoding="utf-8")
    assert len(source.splitlines()) < 600
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring is not None
    purpose = docstring.split("\n\n", 1)[0].replace("\n", " ")
    assert purpose.endswith(".")
    assert purpose.count(". ") == 0, purpose  # one sentence


def test_the_store_imports_nothing_of_the_agent() -> None:
    for path in (PACKAGE / "store").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        ] + [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        ]
        assert not [m for m in imported if m.startswith("juno_bind_trio.agent")], path.name
