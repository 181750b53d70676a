"""Without an optional extra, the error names the extra and the install line that works.

Each case runs in a subprocess whose imports of the extra's modules are
blocked by a meta-path finder, as on a base install (the test environment
has every extra installed).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from juno_bind_trio._extras import EXTRAS

ROOT = Path(__file__).resolve().parent.parent

BLOCKER = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = {blocked!r}

class Blocker(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""


def run_blocked(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    program = BLOCKER.format(blocked=sorted(blocked)) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize(
    ("extra", "blocked", "code"),
    [
        ("web", {"starlette"}, "import juno_bind_trio.web"),
        ("web", {"hypercorn"}, "from juno_bind_trio.web import create_app"),
        ("web", {"ag_ui"}, "from juno_bind_trio.web import create_agui_app"),
        ("mcp", {"mcp", "mcp_types"}, "import juno_bind_trio.mcp"),
        # The SDK installed without the validator the adapter imports itself.
        ("mcp", {"jsonschema"}, "from juno_bind_trio.mcp import open_mcp_stdio"),
        ("google", {"google"}, "import juno_bind_trio.providers.google"),
        ("anthropic", {"anthropic"}, "import juno_bind_trio.providers.anthropic"),
        ("bedrock", {"aiobotocore"}, "import juno_bind_trio.providers.bedrock"),
        (
            "postgres",
            {"psycopg", "psycopg_pool"},
            "from juno_bind_trio.store import PostgresRunStore\n"
            "PostgresRunStore('postgresql://user@127.0.0.1/db')",
        ),
    ],
)
def test_a_missing_extra_names_itself_and_the_install_line(
    extra: str, blocked: set[str], code: str
) -> None:
    probe = f"""
try:
{textwrap.indent(code, "    ")}
except ImportError as exc:
    print(exc)
    print(exc.name)
    print(exc.__cause__ is None and exc.__suppress_context__)
else:
    print("imported")
"""
    completed = run_blocked(blocked, probe)
    assert completed.returncode == 0, completed.stderr
    message, name, bare = completed.stdout.splitlines()
    assert f"[{extra}] extra" in message
    assert f"pip install -e '.[{extra}]'" in message
    assert name in blocked
    assert name in message
    assert bare == "True"


def test_a_provider_subpackage_leaves_its_sdk_to_its_first_use() -> None:
    # The extra is found, not imported: `import anthropic` alone is some two seconds
    # of CPU, which a host (or a test process) that never opens a client never pays.
    probe = (
        "import sys\n"
        "import juno_bind_trio.providers.anthropic, juno_bind_trio.providers.google\n"
        "print([m for m in ('anthropic', 'google.genai') if m in sys.modules])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "[]\n"


def test_the_base_install_imports_and_runs_without_any_extra() -> None:
    every = {module for modules in EXTRAS.values() for module in modules}
    completed = run_blocked(
        every,
        """
        import juno_bind_trio
        from juno_bind_trio import Agent
        from juno_bind_trio.testing import StreamResponse, fake_openai_env
        from juno_bind_trio.store import SqliteRunStore
        with fake_openai_env([StreamResponse.of_text("ok")]):
            print(Agent("openai:m").run_sync("hi").output)  # traced by nothing: no API
        """,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "ok\n"


@pytest.mark.parametrize(
    ("example", "extra"),
    [
        ("mcp_agent.py", "mcp"),
        ("mcp_notes_server.py", "mcp"),
        ("live_view.py", "web"),
        ("ui_protocols.py", "web"),
        ("tracing.py", "otel"),
    ],
)
def test_an_example_on_a_base_install_says_which_extra_it_needs(example: str, extra: str) -> None:
    every = {module for modules in EXTRAS.values() for module in modules}
    completed = run_blocked(
        every,
        f"""
        import runpy
        runpy.run_path({str(ROOT / "examples" / example)!r}, run_name="__main__")
        """,
    )
    assert completed.returncode != 0
    last = completed.stderr.strip().splitlines()[-1]
    assert f"pip install -e '.[{extra}]'" in last, completed.stderr


def test_every_example_names_what_it_needs_in_its_docstring() -> None:
    import ast

    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.name == "quickstart.py":
            continue  # the README's eight lines, verbatim; the README says what it needs
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "pip install -e" in docstring, path.name


def test_the_docs_show_the_install_line_that_works_from_a_checkout() -> None:
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts += sorted((ROOT / "src").rglob("*.py"))
    for path in texts:
        text = path.read_text(encoding="utf-8")
        # The package is on no index: `pip install 'juno-bind-trio[web]'` fails.
        assert "pip install 'juno-bind-trio" not in text, path
        assert 'pip install "juno-bind-trio' not in text, path
