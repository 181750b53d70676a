"""The durable-runs how-to runs as written, and the command line lists, shows and resumes."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from conftest import run_on
from juno_bind_trio.store import DurableRun, SqliteRunStore
from juno_bind_trio.store.__main__ import main

ROOT = Path(__file__).resolve().parent.parent.parent
HOW_TO = ROOT / "docs" / "how-to" / "durable-runs.md"


def load_how_to() -> ModuleType:
    blocks = re.findall(r"```python\n(.*?)```", HOW_TO.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) >= 4
    module = ModuleType("durable_runs_how_to")
    exec(compile("\n".join(blocks), str(HOW_TO), "exec"), module.__dict__)
    return module


def test_the_how_to_runs_as_written(backend: str, tmp_path: Path) -> None:
    page = load_how_to()
    run_on(backend, page.crash_then_resume, str(tmp_path / "runs.db"))
    assert len(page.LEDGER) == 1


def test_the_how_to_agent_sample_runs(backend: str, tmp_path: Path) -> None:
    page = load_how_to()
    assert run_on(backend, page.with_an_agent, str(tmp_path / "runs.db")) == "Done."
    assert list(page.CHARGED.values()) == [20]


def test_the_how_to_charge_runs_once_without_a_crash(backend: str, tmp_path: Path) -> None:
    page = load_how_to()
    path = str(tmp_path / "runs.db")
    run_on(backend, page.create, path)
    assert run_on(backend, page.work, path, "w1") == 1
    assert run_on(backend, page.work, path, "w2") == 0  # nothing left to claim
    assert len(page.LEDGER) == 1


async def seeded(path: str) -> None:
    async with SqliteRunStore(path) as store:
        await store.create_run("a", messages=[{"role": "user", "content": "hi"}])
        await store.create_run("b", messages=[{"role": "user", "content": "there"}])
        lease = await store.claim_run("b", owner="w1", ttl=60)
        await store.save_turn(
            lease,
            iteration=1,
            assistant={
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
                ],
            },
        )


async def handler(run: DurableRun) -> None:
    """Used by the resume test, by name: answers the open call, then ends the run."""
    from juno_bind_trio.loop import ToolCallOutcome

    async def tool(call: Any) -> ToolCallOutcome:
        return ToolCallOutcome(
            tool_message={"role": "tool", "tool_call_id": call["id"], "content": "ok"}
        )

    await run.finish_open_turn(tool)
    await run.finish("completed")


def test_list_and_show(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    out = io.StringIO()
    assert main([path, "list"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines == ["a\tpending\titeration 0\tlease -", "b\trunning\titeration 0\tlease w1"]
    out = io.StringIO()
    assert main([path, "list", "--status", "pending"], out=out) == 0
    assert out.getvalue().splitlines() == ["a\tpending\titeration 0\tlease -"]
    out = io.StringIO()
    assert main([path, "show", "b"], out=out) == 0
    shown = json.loads(out.getvalue())
    assert shown["run"]["status"] == "running"
    assert shown["open_turn"]["tool_calls"][0]["id"] == "c1"
    assert shown["messages"] == [{"role": "user", "content": "there"}]


def test_show_an_unknown_run_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    assert main([path, "show", "nope"]) == 1
    assert "no run 'nope'" in capsys.readouterr().err


def test_resume_hands_the_run_to_a_handler(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    assert main([path, "resume", "a", "--handler", "store.test_docs_and_cli:handler"]) == 0

    async def status() -> str:
        async with SqliteRunStore(path) as store:
            return (await store.get_run("a")).status

    assert anyio.run(status) == "completed"


def test_the_module_runs_as_a_command(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    done = subprocess.run(
        [sys.executable, "-m", "juno_bind_trio.store", path, "list"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines()[0].startswith("a\tpending")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["{db}", "resume", "a", "--handler", "no_such_module_here:go"], "cannot be loaded"),
        (["{db}", "resume", "a", "--handler", "store.test_docs_and_cli:nothing"], "cannot be"),
        (["{db}", "resume", "a", "--handler", "store.test_docs_and_cli:HOW_TO"], "not callable"),
        (["{db}", "resume", "a", "--handler", "no-colon"], "MODULE:FUNCTION"),
        (["{db}", "list", "--limit", "0"], "--limit must be a positive"),
    ],
)
def test_bad_arguments_print_an_error_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    assert main([a.replace("{db}", path) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert words in err

    async def status() -> str:
        async with SqliteRunStore(path) as store:
            return (await store.get_run("a")).status

    assert anyio.run(status) == "pending"  # not claimed by a resume that could not start


def test_a_database_that_is_not_there_is_an_error_not_a_new_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    assert main([str(missing), "list"]) == 1
    assert "no database at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_database_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, only words\n" * 20, encoding="utf-8")
    assert main([str(notes), "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: SqliteRunStore: cannot open ")
    assert "notes.txt" in err
    assert "not a database" in err
    assert notes.read_text(encoding="utf-8").startswith("not a database")  # left as it was


def test_a_libpq_keyword_string_is_taken_for_postgresql(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    dsn = "host=127.0.0.1 port=1 user=me password=pw-s3cr3t connect_timeout=1"
    started = time.monotonic()
    assert main([dsn, "--connect-timeout", "0.5", "list"]) == 1
    # Real time, bounded: the pool gives up after --connect-timeout, not the default 10 s.
    assert time.monotonic() - started < 8
    err = capsys.readouterr().err
    assert "PostgresRunStore: cannot connect" in err
    assert "pw-s3cr3t" not in err
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the DSN


@pytest.mark.parametrize("bad", ["-1", "nan", "inf"])
def test_a_bad_connect_timeout_is_an_error_not_a_traceback(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["host=127.0.0.1 port=1", "--connect-timeout", bad, "list"]) == 1
    assert "connect_timeout" in capsys.readouterr().err
