"""The command line's ``waiting`` and ``pending``: runs waiting for a decision, and their calls."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest

from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.store.__main__ import main

from .store_helpers import postgres_dsn
from .test_approvals_store import Shop


def open_store(db: str) -> RunStore:
    return PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)


async def two_runs_one_decided(db: str) -> None:
    async with open_store(db) as store:
        shop = Shop()
        for run_id in ("r1", "r2"):
            await shop.agent(store, "w1").run("refund", run_id=run_id)
        await shop.agent(store, "w2").resume(
            "r2", approvals={"c1": False}, results={"c3": "tue"}, principal="ann"
        )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_waiting_lists_runs_with_undecided_calls_and_pending_shows_the_audit(
    kind: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "runs.db") if kind == "sqlite" else postgres_dsn()
    anyio.run(two_runs_one_decided, db)
    out = io.StringIO()
    assert main([db, "waiting"], out=out) == 0
    assert out.getvalue() == "r1\t2 waiting\trefund:c1 pick:c3\n"
    out = io.StringIO()
    assert main([db, "pending", "r1"], out=out) == 0
    shown = json.loads(out.getvalue())
    assert [(c["id"], c["name"], c["kind"], c["waiting"], c["decision"]) for c in shown] == [
        ("c1", "refund", "approval", True, None),
        ("c3", "pick", "external", True, None),
    ]
    assert shown[0]["arguments"] == {"amount": 500}
    out = io.StringIO()
    assert main([db, "pending", "r2"], out=out) == 0
    decided = {c["id"]: c["decision"] for c in json.loads(out.getvalue())}
    assert {i: (d["kind"], d["principal"], d["answer"]) for i, d in decided.items()} == {
        "c1": ("denied", "ann", "denied"),
        "c3": ("result", "ann", "tue"),
    }
    assert all(isinstance(d["decided_at"], float) for d in decided.values())


def test_pending_for_an_unknown_run_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "runs.db")
    anyio.run(two_runs_one_decided, db)
    assert main([db, "pending", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main([db, "waiting", "--limit", "0"]) == 2
