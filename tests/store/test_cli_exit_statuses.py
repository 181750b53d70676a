"""The store's command line exits 0, 2 or 1, and says why on one line, in a real process.

2 is a mistake on the command line (here: a run id typed that is not stored),
whichever the command; 1 is everything else that stops it: the handler's own
code not finding a run it looks up (the run typed was found), and a database
made by a newer version of the package. SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from juno_bind_trio.store import SCHEMA_VERSION, PostgresRunStore, RunStore, SqliteRunStore
from script_runner import STORE_PREIMPORT, run_script

from .store_helpers import postgres_dsn, raw_execute

HOSTS = """
import os

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, SqliteRunStore

DB = os.environ["HOSTS_DB"]


def open_store():
    return PostgresRunStore(DB) if DB.startswith("postgresql://") else SqliteRunStore(DB)


async def finishes(run):
    await run.finish("completed")


async def looks_up_another_run(run):
    async with open_store() as store:
        await store.get_run("other-9")  # the host's own lookup: not there


async def answers(turn):
    return ModelTurnResult(content="done")


async def looks_up_another_run_too(turn):
    async with open_store() as store:
        await store.get_run("other-9")
    return ModelTurnResult(content="never")


AGENT = Agent(answers, store=open_store(), store_owner="w1")
LOOKING_AGENT = Agent(looks_up_another_run_too, store=open_store(), store_owner="w1")
"""


def open_store(db: str) -> RunStore:
    return PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)


async def seed(db: str) -> None:
    async with open_store(db) as store:
        for run_id in ("a", "b", "c"):
            await store.create_run(run_id, messages=[{"role": "user", "content": "hi"}])


async def statuses(db: str) -> dict[str, str]:
    async with open_store(db) as store:
        return {run.run_id: run.status for run in await store.list_runs()}


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    database = str(tmp_path / "runs.db") if request.param == "sqlite" else postgres_dsn()
    anyio.run(seed, database)
    (tmp_path / "hosts.py").write_text(HOSTS, encoding="utf-8")
    return database


def cli(tmp_path: Path, db: str, *argv: str) -> subprocess.CompletedProcess[str]:
    # Real time, bounded: each command is one short process. Its folder holds hosts.py.
    return run_script(
        "juno_bind_trio.store",
        db,
        *argv,
        cwd=tmp_path,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "HOSTS_DB": db},
        timeout=60,
        module=True,
        preimport=STORE_PREIMPORT,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # one line, no traceback
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_resume_that_does_what_it_says_exits_0(db: str, tmp_path: Path) -> None:
    done = cli(tmp_path, db, "resume", "a", "--handler", "hosts:finishes")
    assert (done.returncode, done.stdout, done.stderr) == (0, "a\tcompleted\n", "")
    done = cli(tmp_path, db, "resume", "b", "--handler", "hosts:AGENT")
    assert (done.returncode, done.stdout, done.stderr) == (0, "b\tcompleted\n", "")


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "ghost-7"],
        ["pending", "ghost-7"],
        ["resume", "ghost-7", "--handler", "hosts:finishes"],
        ["resume", "ghost-7", "--handler", "hosts:AGENT"],
        ["resume", "ghost-7", "--handler", "hosts:looks_up_another_run"],
    ],
)
def test_a_run_id_typed_that_is_not_stored_exits_2(
    db: str, tmp_path: Path, argv: list[str]
) -> None:
    done = cli(tmp_path, db, *argv)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done) == "error: no run 'ghost-7' is stored"
    assert anyio.run(statuses, db) == {"a": "pending", "b": "pending", "c": "pending"}


@pytest.mark.parametrize("handler", ["hosts:looks_up_another_run", "hosts:LOOKING_AGENT"])
def test_a_run_the_handlers_code_does_not_find_exits_1(
    db: str, tmp_path: Path, handler: str
) -> None:
    """Not the user's mistake: the run typed is there, and was claimed; the handler failed."""
    done = cli(tmp_path, db, "resume", "a", "--handler", handler)
    assert done.returncode == 1, done.stderr
    assert one_error_line(done) == (
        f"error: --handler {handler!r} failed: no run 'other-9' is stored"
    )
    assert done.stdout == ""
    assert anyio.run(statuses, db) == {"a": "failed", "b": "pending", "c": "pending"}


@pytest.mark.parametrize(
    "argv",
    [["list"], ["show", "a"], ["resume", "a", "--handler", "hosts:finishes"]],
)
def test_a_database_newer_than_the_package_exits_1_naming_both_versions(
    db: str, tmp_path: Path, argv: list[str]
) -> None:
    raw_execute(open_store(db), "INSERT INTO juno_schema (version) VALUES (?)", (99,))
    done = cli(tmp_path, db, *argv)
    assert done.returncode == 1, done.stderr
    line = one_error_line(done)
    assert f"schema version 99, newer than the {SCHEMA_VERSION} this version" in line
    assert "upgrade juno_bind_trio" in line
    assert done.stdout == ""
    raw_execute(
        open_store(db), "DELETE FROM juno_schema WHERE version > ?", (SCHEMA_VERSION,)
    )  # as it was: the runs untouched, nothing claimed
    assert anyio.run(statuses, db) == {"a": "pending", "b": "pending", "c": "pending"}
