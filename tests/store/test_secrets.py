"""Nothing secret lands in the store or its logs: no API key, no DSN password or passphrase.

An agent runs through the real ``openai`` SDK with a recognisable API key and
a store; then every stored byte (the SQLite file and its WAL, every row of
every table on PostgreSQL) and every log record is searched for the key and
for the database's own password.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

from .store_helpers import DSN_ENV, TABLES, raw_query

pytestmark = pytest.mark.anyio

API_KEY = "sk-live-7f3c9a1e-never-store-me"


@tool
async def get_weather(city: str) -> dict[str, str]:
    """Forecast for a city.

    Args:
        city: The city's name.
    """
    return {"city": city, "sky": "clear"}


def stored_text(store: RunStore) -> str:
    """Every row of every table of the store, as text."""
    return "\n".join(repr(raw_query(store, f"SELECT * FROM {table}")) for table in TABLES)


def stored_bytes(store: RunStore) -> bytes:
    """The SQLite database's files, byte for byte (the WAL too); nothing for PostgreSQL."""
    if not isinstance(store, SqliteRunStore):
        return b""
    path = Path(store.path)
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def database_secrets(store: RunStore) -> list[str]:
    if isinstance(store, SqliteRunStore):
        return []
    from psycopg.conninfo import conninfo_to_dict

    password = conninfo_to_dict(os.environ[DSN_ENV]).get("password")
    return [str(password)] if password else []


async def test_no_api_key_or_password_lands_in_the_store_or_its_logs(
    store: RunStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    script = [
        StreamResponse.of_tool_calls(("call_1", "get_weather", '{"city": "Oslo"}')),
        StreamResponse.of_text("Clear in Oslo."),
    ]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        agent = Agent("openai:juno-small", tools=[get_weather], store=store, name="forecaster")
        result = await agent.run("Weather in Oslo?", run_id="weather-1")
    assert result.output == "Clear in Oslo."
    assert server.requests[0].header("authorization") == f"Bearer {API_KEY}"  # it was used
    text, raw = stored_text(store), stored_bytes(store)
    assert "Oslo" in text
    assert "forecaster" in text
    secrets = [API_KEY, *database_secrets(store)]
    for secret in secrets:
        assert secret not in text
        assert secret.encode() not in raw
        assert secret not in caplog.text
        assert secret not in repr(store)
    loaded = await store.load("weather-1")
    assert all(secret not in repr(loaded) for secret in secrets)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://me:pw-s3cr3t@127.0.0.1:1/db?sslpassword=key-s3cr3t",
        "host=127.0.0.1 port=1 user=me password=pw-s3cr3t sslpassword=key-s3cr3t dbname=db",
    ],
)
async def test_a_dsns_password_and_key_passphrase_are_never_shown(dsn: str) -> None:
    store = PostgresRunStore(dsn, connect_timeout=0.5)
    assert "me" in repr(store)  # the rest of the DSN is shown, to say which database
    for secret in ("pw-s3cr3t", "key-s3cr3t"):
        assert secret not in repr(store)
