"""examples/tool_loop.py runs with no network, on both backends, and says what happened."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from conftest import run_on

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool_loop.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tool_loop_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_completes_and_prints_the_run(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example()
    result = run_on(backend, example.main)
    assert result.reason == "completed"
    assert result.iterations == 2
    # 0.2 model + 0.1 serial + 0.3 pool (0.3 and 0.1 concurrent) + 0.2 model
    assert result.stats.model_seconds == pytest.approx(0.4)
    assert result.stats.tool_seconds == pytest.approx(0.4)
    out = capsys.readouterr().out
    assert "send_email failed (validation)" in out
    assert "ended: completed after 2 model calls, 2 saves" in out
    assert "plugins active: ['calendar']" in out
    failure = json.dumps(
        {
            "success": False,
            "kind": "validation",
            "error": "'not-an-address' is not an email address",
        },
        separators=(",", ":"),
    )
    assert failure in out
