"""The durable-runs how-to runs as written, and the command line lists, shows and resumes."""

from __future__ import annotations

import io
import json
import os
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
    said = run_on(backend, page.crash_then_resume, str(tmp_path / "runs.db"))
    assert said == "order-17 completed, charged 1 time(s)"
    assert len(page.LEDGER) == 1


def test_the_how_to_is_a_script_that_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = HOW_TO.read_text(encoding="utf-8")
    script = tmp_path / "durable_runs.py"
    script.write_text("\n".join(re.findall(r"```python\n(.*?)```", text, re.S)), "utf-8")
    # Real time, bounded: a script, run as a reader would run it.
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "".join(re.findall(r"```text\n(.*?)```", text, re.S))
    assert list(tmp_path.iterdir()) == [script]  # its databases were temporary


def test_the_how_to_shows_a_lease_lost_and_what_to_do(backend: str, tmp_path: Path) -> None:
    page = load_how_to()
    assert run_on(backend, page.lease_lost, str(tmp_path / "lost.db")) == "r1 resumed: completed"


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
    assert lines == [
        "a\tpending\titeration 0\tlease -\t-\tagent -",
        "b\trunning\titeration 0\tlease w1\t-\tagent -",
    ]
    out = io.StringIO()
    assert main([path, "list", "--status", "pending"], out=out) == 0
    assert out.getvalue().splitlines() == ["a\tpending\titeration 0\tlease -\t-\tagent -"]
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
    assert main([path, "show", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_resume_hands_the_run_to_a_handler(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    out = io.StringIO()
    assert main([path, "resume", "a", "--handler", "store.test_docs_and_cli:handler"], out) == 0
    assert out.getvalue() == "a\tcompleted\n"
    assert anyio.run(status, path, "a") == "completed"


async def status(path: str, run_id: str) -> str:
    async with SqliteRunStore(path) as store:
        return (await store.get_run(run_id)).status


async def on_trio(run: DurableRun) -> None:
    """A handler written for Trio: its checkpoint fails on any other event loop."""
    import trio.lowlevel

    await trio.lowlevel.checkpoint()
    await handler(run)


async def on_asyncio(run: DurableRun) -> None:
    """A handler written for asyncio."""
    import asyncio

    await asyncio.sleep(0)
    await handler(run)


def test_resume_runs_the_handler_on_trio_unless_told_otherwise(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    argv = [path, "resume", "a", "--handler", "store.test_docs_and_cli:on_trio"]
    assert main(argv, io.StringIO()) == 0
    assert anyio.run(status, path, "a") == "completed"
    argv = [path, "resume", "b", "--handler", "store.test_docs_and_cli:on_asyncio"]
    assert main([*argv, "--owner", "w1"], io.StringIO()) == 1  # not on Trio, it cannot
    assert anyio.run(status, path, "b") == "failed"


def test_resume_runs_the_handler_on_asyncio_when_asked(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    argv = [path, "resume", "a", "--handler", "store.test_docs_and_cli:on_asyncio"]
    assert main([*argv, "--backend", "asyncio"], io.StringIO()) == 0
    assert anyio.run(status, path, "a") == "completed"


async def answering(turn: Any) -> Any:
    from juno_bind_trio.loop import ModelTurnResult

    if turn.messages[-1]["role"] == "tool":
        return ModelTurnResult(content="resumed by the agent")
    return ModelTurnResult(content="answered")


def cli_agent(store: object) -> Any:
    from juno_bind_trio.agent import Agent, tool

    @tool
    async def t() -> str:
        """The seeded runs' tool."""
        import trio.lowlevel

        await trio.lowlevel.checkpoint()  # the CLI runs it on Trio
        return "ok"

    return Agent(answering, tools=[t], store=store, store_owner="w1")  # type: ignore[arg-type]


AGENT: Any = None  # set by the tests below: the handler named "store.test_docs_and_cli:AGENT"


@pytest.mark.parametrize("given", ["path", "store"])
def test_resume_with_an_agent_as_the_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    # As a module would build it: a path, or a store nobody opened yet.
    agent = cli_agent(path if given == "path" else SqliteRunStore(path))
    monkeypatch.setattr(sys.modules[__name__], "AGENT", agent)
    out = io.StringIO()
    assert main([path, "resume", "b", "--handler", "store.test_docs_and_cli:AGENT"], out) == 0
    assert out.getvalue() == "b\tcompleted\n"

    async def stored() -> Any:
        async with SqliteRunStore(path) as store:
            return await store.load("b")

    loaded = anyio.run(stored)
    assert loaded.record.status == "completed"
    assert loaded.messages[-1] == {"role": "assistant", "content": "resumed by the agent"}


def test_resume_with_an_agent_on_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    from juno_bind_trio.store import PostgresRunStore

    from .store_helpers import postgres_dsn

    dsn = postgres_dsn()

    async def seed() -> None:
        async with PostgresRunStore(dsn) as store:
            await store.create_run("p1", messages=[{"role": "user", "content": "hi"}])

    anyio.run(seed)
    monkeypatch.setattr(sys.modules[__name__], "AGENT", cli_agent(PostgresRunStore(dsn)))
    out = io.StringIO()
    assert main([dsn, "resume", "p1", "--handler", "store.test_docs_and_cli:AGENT"], out) == 0
    assert out.getvalue() == "p1\tcompleted\n"


def test_an_agent_on_another_database_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    other = str(tmp_path / "other.db")
    anyio.run(seeded, other)
    argv = [path, "resume", "a", "--handler", "store.test_docs_and_cli:AGENT"]
    monkeypatch.setattr(sys.modules[__name__], "AGENT", cli_agent(other))
    assert main(argv) == 2
    assert "is not" in capsys.readouterr().err
    monkeypatch.setattr(sys.modules[__name__], "AGENT", cli_agent(path))
    assert main([*argv, "--owner", "w7"]) == 2
    assert "resumes under its own store_owner" in capsys.readouterr().err
    monkeypatch.setattr(sys.modules[__name__], "AGENT", cli_agent(None))
    assert main(argv) == 2
    assert "without a store" in capsys.readouterr().err
    assert [anyio.run(status, db, "a") for db in (path, other)] == ["pending", "pending"]


def test_the_module_runs_as_a_command(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    done = subprocess.run(
        [sys.executable, "-m", "juno_bind_trio.store", path, "list"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines()[0] == "a\tpending\titeration 0\tlease -\t-\tagent -"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["{db}", "resume", "a", "--handler", "no_such_module_here:go"], "cannot be loaded"),
        (["{db}", "resume", "a", "--handler", "store.test_docs_and_cli:nothing"], "cannot be"),
        (["{db}", "resume", "a", "--handler", "store.test_docs_and_cli:HOW_TO"], "not callable"),
        (["{db}", "resume", "a", "--handler", "no-colon"], "MODULE:NAME"),
        (["{db}", "list", "--limit", "0"], "--limit must be a positive"),
    ],
)
def test_bad_arguments_print_an_error_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    assert main([a.replace("{db}", path) for a in argv]) == 2
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
    assert main([str(missing), "list"]) == 2
    assert "no database at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_database_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, only words\n" * 20, encoding="utf-8")
    assert main([str(notes), "list"]) == 2
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
    assert main([dsn, "--connect-timeout", "0.5", "list"]) == 2
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
    assert main(["host=127.0.0.1 port=1", "--connect-timeout", bad, "list"]) == 2
    assert "connect_timeout" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["show", "ghost-7"], "'ghost-7'"),
        (["pending", "ghost-7"], "'ghost-7'"),
        (["resume", "ghost-7", "--handler", "store.test_docs_and_cli:on_trio"], "'ghost-7'"),
        (["waiting", "--limit", "-3"], "-3"),
        (["conversations", "--limit", "0"], "got 0"),
        (["conversation", "ghost-7"], "'ghost-7'"),
    ],
)
def test_every_usage_error_exits_2_naming_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    path = str(tmp_path / "runs.db")
    anyio.run(seeded, path)
    assert main([path, *argv], io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert named in err
    # What is not a usage error keeps exit 1: a handler that fails.
    if argv[0] == "resume":
        failing = ["resume", "b", "--handler", "store.test_docs_and_cli:on_asyncio"]
        assert main([path, *failing, "--owner", "w1"], io.StringIO()) == 1
