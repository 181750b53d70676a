"""One tool call, parsed once: from the SDK's stream to the tool, through the store.

The arguments of a call are read by the defect check, the receipt key, the
dispatcher, the tool's validation and its idempotency key. Each reads the one
[`ToolCall`][juno_bind_trio.run.ToolCall] the stream built, so the package's
arguments rule runs once per call. Counted where the rule runs, and where a
second parse would have to go (``json.loads`` of the raw text).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import juno_bind_trio._calls as calls_module
from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.run import tool_call_idempotency_key, tool_call_receipt_key
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio

ARGUMENTS = {
    "c1": '{"eur": 12}',
    "c2": '{ "eur" :  30 }',
    "c3": "",  # a call with no arguments: the rule's empty object
    "c4": " null ",
}


class Counted:
    """Every application of the arguments rule, by the raw text it read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rule: Counter[str] = Counter()
        self.loads: Counter[str] = Counter()
        rule = calls_module._refusal
        loads = json.loads

        def counted_rule(raw: str) -> Any:
            self.rule[raw] += 1
            return rule(raw)

        def counted_loads(text: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(text, str) and text in ARGUMENTS.values():
                self.loads[text] += 1
            return loads(text, *args, **kwargs)

        monkeypatch.setattr(calls_module, "_refusal", counted_rule)
        monkeypatch.setattr(json, "loads", counted_loads)


async def test_each_call_is_parsed_once_from_the_stream_to_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys: dict[str, str] = {}

    @tool(uses_idempotency_key=True)
    async def charge(ctx: RunContext[None], eur: int) -> str:
        """Charge the card."""
        keys[ctx.tool_call_id] = ctx.idempotency_key
        return f"charged {eur}"

    @tool
    async def ping(ctx: RunContext[None]) -> str:
        """Ping."""
        keys[ctx.tool_call_id] = ctx.idempotency_key
        return "pong"

    script = [
        StreamResponse.of_tool_calls(
            ("c1", "charge", ARGUMENTS["c1"]),
            ("c2", "charge", ARGUMENTS["c2"]),
            ("c3", "ping", ARGUMENTS["c3"]),
            ("c4", "ping", ARGUMENTS["c4"]),
            fragments=3,
        ),
        StreamResponse.of_text("done"),
    ]
    path = tmp_path / "runs.db"
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent = Agent("openai:m", tools=[charge, ping], store=str(path))
        counted = Counted(monkeypatch)
        result = await agent.run("go", run_id="r1")
        monkeypatch.undo()
    assert result.output == "done"
    # Once per call: the defect check's parse served the receipt key, the
    # dispatcher, the validation and the idempotency key.
    assert counted.rule == Counter(ARGUMENTS.values())
    assert counted.loads == Counter()
    answers = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert answers == {"c1": "charged 12", "c2": "charged 30", "c3": "pong", "c4": "pong"}
    # What was read once is what the store keyed the receipts by, and what the tools saw.
    async with SqliteRunStore(path) as store:
        receipts = {r.tool_call_id: r for r in await store.receipts("r1")}
    assert set(receipts) == set(ARGUMENTS)
    for call_id, raw in ARGUMENTS.items():
        name = "charge" if call_id in ("c1", "c2") else "ping"
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}
        key = tool_call_receipt_key("r1", call)
        assert receipts[call_id].args_hash == key.args_hash
        assert keys[call_id] == tool_call_idempotency_key(key)
    # No arguments, however they were sent, hash alike.
    assert receipts["c3"].args_hash == receipts["c4"].args_hash
