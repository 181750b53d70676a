"""The command line's conversation commands, run as a user runs them (a subprocess):
``conversations``, ``conversation ID`` and ``delete-conversation ID``, on SQLite and
PostgreSQL; what is not there (an id, the database) exits 2 naming it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from script_runner import STORE_PREIMPORT, run_script

from .durable_world import call
from .store_helpers import postgres_dsn


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    # Real time, bounded: each command is one short process.
    return run_script(
        "juno_bind_trio.store",
        *argv,
        cwd=Path.cwd(),
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
        module=True,
        preimport=STORE_PREIMPORT,
    )


def open_store(db: str) -> RunStore:
    return PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)


@tool
async def weather(ctx: RunContext[None], city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def model(turn: ModelTurn) -> ModelTurnResult:
    last = turn.messages[-1]
    if last["role"] == "tool":
        return ModelTurnResult(content=f"It is {last['content']}.")
    if last["content"] == "weather?":
        return ModelTurnResult(
            content="Let me look.", tool_calls=(call("w1", "weather", city="Oslo"),)
        )
    return ModelTurnResult(content=f"you said {last['content']}")


async def seed(db: str) -> None:
    async with open_store(db) as store:
        agent = Agent(model, tools=[weather], instructions="Be brief.", store=store)
        await agent.run("hello", conversation="thread-42", run_id="r1")
        await agent.run("weather?", conversation="thread-42", run_id="r2")
        await agent.run("other", conversation="thread-43", run_id="r3")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    database = str(tmp_path / "runs.db") if request.param == "sqlite" else postgres_dsn()
    anyio.run(seed, database)
    return database


def test_list_show_and_delete_conversations(db: str) -> None:
    listed = cli(db, "conversations")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        "thread-42\t2 turns\tlast r2\theld by -\nthread-43\t1 turns\tlast r3\theld by -\n"
    )
    assert cli(db, "conversations", "--limit", "1").stdout.count("\n") == 1
    shown = cli(db, "conversation", "thread-42")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (
        "thread-42\t2 turns\tlast r2\theld by -\n"
        "--- 1 system\nBe brief.\n"
        "--- 2 user\nhello\n"
        "--- 3 assistant\nyou said hello\n"
        "--- 4 user\nweather?\n"
        "--- 5 assistant\nLet me look.\n"
        '-> weather({"city": "Oslo"}) [w1]\n'
        "--- 6 tool (answers w1)\nsunny in Oslo\n"
        "--- 7 assistant\nIt is sunny in Oslo.\n"
    )
    deleted = cli(db, "delete-conversation", "thread-42")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout == "thread-42\tdeleted\n"
    assert cli(db, "conversations").stdout == "thread-43\t1 turns\tlast r3\theld by -\n"

    async def runs_left() -> list[str]:
        async with open_store(db) as store:
            return [r.run_id for r in await store.list_runs()]

    assert anyio.run(runs_left) == ["r3"]  # the conversation's runs went with it


def test_an_unknown_conversation_exits_2_naming_it(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    anyio.run(seed, db)
    for command in ("conversation", "delete-conversation"):
        done = cli(db, command, "thread-99")
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr == (
            "error: no conversation 'thread-99' in this database"
            + ("; nothing deleted" if command == "delete-conversation" else "")
            + "\n"
        )
        assert done.stdout == ""
    assert cli(db, "conversations").stdout.count("\n") == 2  # nothing was deleted


def test_a_database_that_is_not_there_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    done = cli(str(missing), "conversations")
    assert done.returncode == 2
    assert done.stderr == (
        f"error: no database at {str(missing)!r} (a SQLite file, or a PostgreSQL DSN)\n"
    )
    assert list(tmp_path.iterdir()) == []  # no empty database made by the typo
    dsn = "postgresql://me:pw-s3cr3t@127.0.0.1:1/nope"
    done = cli(dsn, "--connect-timeout", "0.5", "conversation", "t")
    assert done.returncode == 2
    # (psycopg's pool logs its own attempts on stderr before the error line.)
    assert (
        "error: PostgresRunStore: cannot connect to 'user=me dbname=nope host=127.0.0.1 port=1'"
        in done.stderr
    )
    assert "pw-s3cr3t" not in done.stderr
    # The other commands say so the same way.
    assert cli(str(missing), "list").returncode == 2


def test_a_held_conversation_is_not_deleted(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    anyio.run(seed, db)

    async def hold() -> None:
        async with open_store(db) as store:
            await store.claim_conversation("thread-43", run_id="r9", ttl=3600.0)

    anyio.run(hold)
    done = cli(db, "delete-conversation", "thread-43")
    assert done.returncode == 1
    assert "conversation 'thread-43' is held by run 'r9'" in done.stderr
    assert "thread-43\t1 turns\tlast r3\theld by r9" in cli(db, "conversations").stdout
