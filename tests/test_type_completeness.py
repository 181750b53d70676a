"""``pyright --verifytypes juno_bind_trio``: every public symbol has a known type.

pyright judges a package the way a user's type checker sees an installed
copy, so the package is copied into a temporary search path (pyright does not
verify an editable install). pyright comes with the ``lint`` extra; without it
this test is skipped, and ``nox -s verifytypes`` runs the same check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pyright() -> list[str]:
    exe = shutil.which("pyright", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("pyright is not installed (pip install -e '.[lint]')")
    return [exe]


def test_public_api_is_fully_typed(tmp_path: Path) -> None:
    command = pyright()
    site = tmp_path / "site"
    shutil.copytree(
        ROOT / "src" / "juno_bind_trio",
        site / "juno_bind_trio",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    proc = subprocess.run(
        [
            *command,
            "--pythonpath",
            sys.executable,
            "--verifytypes",
            "juno_bind_trio",
            "--ignoreexternal",
            "--outputjson",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(proc.stdout)
    completeness = report["typeCompleteness"]
    problems = [
        f"{symbol['name']}: {diagnostic['message']}"
        for symbol in completeness["symbols"]
        for diagnostic in symbol.get("diagnostics", [])
        if diagnostic.get("severity") == "error"
    ]
    assert completeness["completenessScore"] == 1.0, problems
    assert completeness["exportedSymbolCounts"]["withUnknownType"] == 0
