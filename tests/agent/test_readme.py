"""The README's quick start: its code is examples/quickstart.py, and both of its samples run."""

from __future__ import annotations

import os
import re
from pathlib import Path

from juno_bind_trio.testing import StreamResponse, fake_openai_env
from script_runner import run_script

ROOT = Path(__file__).resolve().parent.parent.parent
QUICKSTART = ROOT / "examples" / "quickstart.py"


def readme_samples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_quick_start_is_at_most_eight_lines_and_is_the_example_file() -> None:
    first, real = readme_samples()[:2]
    assert first == QUICKSTART.read_text(encoding="utf-8")
    assert len([line for line in first.splitlines() if line.strip()]) <= 8
    assert len([line for line in real.splitlines() if line.strip()]) == 3


def test_the_quick_start_runs_with_no_key_and_no_network() -> None:
    warnings = "error::ResourceWarning,ignore:Async generator:ResourceWarning"
    env = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": warnings}
    completed = run_script(QUICKSTART, cwd=Path.cwd(), env=env, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "2 + 3 = 5\n"
    assert "Traceback" not in completed.stderr


def test_the_real_endpoint_sample_reads_the_environment(capsys: object) -> None:
    """The three lines, with the environment pointing at the fake server."""
    first, real = readme_samples()[:2]
    namespace: dict[str, object] = {"__name__": "readme"}
    # The tool definition from the first sample, without its fake-server block.
    exec(first.split("agent = ")[0], namespace)
    before = {name: os.environ.get(name) for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    script = [
        StreamResponse.of_tool_calls(("c1", "add", '{"a": 2, "b": 3}')),
        StreamResponse.of_text("5"),
    ]
    with fake_openai_env(script, api_key="sk-test") as server:
        exec(real, namespace)
    assert [r.model for r in server.requests] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert server.requests[0].header("authorization") == "Bearer sk-test"
    assert namespace["result"].output == "5"  # type: ignore[attr-defined]
    after = {name: os.environ.get(name) for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    assert after == before  # the environment is given back
