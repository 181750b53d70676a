"""Provider state on an assistant message survives the store and healing, unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.providers import PROVIDER_STATE_KEY, provider_state_of
from juno_bind_trio.run import ToolCall
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.transcript import heal_transcript

pytestmark = pytest.mark.anyio

STATE = {
    "provider": "anthropic",
    "thinking": [{"type": "thinking", "thinking": "Look it up.", "signature": "c2ln+/=="}],
}


@tool
async def look(page: int) -> str:
    """Look something up."""
    return f"page {page}"


async def model(turn: ModelTurn) -> ModelTurnResult:
    if sum(1 for m in turn.messages if m["role"] == "assistant") == 0:
        return ModelTurnResult(
            tool_calls=(ToolCall("c1", "look", '{"page": 1}'),),
            extra={PROVIDER_STATE_KEY: STATE},
        )
    return ModelTurnResult(content="Page one.")


async def test_the_store_keeps_provider_state_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    agent = Agent(model, tools=[look], store=str(path))
    result = await agent.run("Look.", run_id="r1")
    async with SqliteRunStore(path) as store:
        loaded = await store.load("r1")
    asking = next(m for m in loaded.messages if m.get("tool_calls"))
    assert provider_state_of(asking, "anthropic") == STATE
    assert loaded.messages == result.messages


def test_healing_keeps_provider_state() -> None:
    transcript: list[dict[str, Any]] = [
        {"role": "user", "content": "Look."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
            ],
            PROVIDER_STATE_KEY: STATE,
        },
        # The answer is missing: healing synthesizes it and keeps the call's message whole.
    ]
    healed = heal_transcript(transcript).messages
    assert healed[1][PROVIDER_STATE_KEY] == STATE
    assert [m["role"] for m in healed] == ["user", "assistant", "tool"]
