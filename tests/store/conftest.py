"""Store fixtures: a SQLite file per test, and a real PostgreSQL when one is reachable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore

from .store_helpers import FakeClock, postgres_dsn


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def store_factory(store_kind: str, tmp_path: Path, clock: FakeClock) -> Iterator[object]:
    """A callable making a new (unopened) store on this test's database."""
    if store_kind == "sqlite":
        path = tmp_path / "runs.db"

        def make_sqlite() -> RunStore:
            return SqliteRunStore(path, clock=clock)

        yield make_sqlite
    else:
        dsn = postgres_dsn()

        def make_postgres() -> RunStore:
            return PostgresRunStore(dsn, clock=clock)

        yield make_postgres


@pytest.fixture
async def store(store_factory: object) -> AsyncIterator[RunStore]:
    assert callable(store_factory)
    async with store_factory() as opened:
        yield opened
