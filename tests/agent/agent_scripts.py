"""A scripted model for the agent's tests: plays turns in order and records what it saw."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import attrs

from juno_bind_trio.loop import ModelTurn, ModelTurnResult


def call(call_id: str, name: str, arguments: Any = None, /, **kwargs: Any) -> dict[str, Any]:
    """A tool call; *arguments* as raw text if a str, else the kwargs as JSON."""
    text = arguments if isinstance(arguments, str) else json.dumps(kwargs)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


@attrs.define
class Say:
    """A turn: *text* streamed in *chunks* (if the turn has a stream), then returned."""

    text: str | None = None
    calls: Sequence[dict[str, Any]] = ()
    chunks: Sequence[str] | None = None
    delay: float = 0.0


@attrs.define
class ScriptedModel:
    """``async (ModelTurn) -> ModelTurnResult`` playing *turns*; *seen* holds each turn's input."""

    turns: list[Say]
    seen: list[list[dict[str, Any]]] = attrs.field(factory=list)
    tools_seen: list[Sequence[Any]] = attrs.field(factory=list)

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.seen.append([dict(m) for m in turn.messages])
        self.tools_seen.append(turn.tools)
        if not self.turns:
            raise AssertionError("the script has no turn left")
        say = self.turns.pop(0)
        stream = turn.text_stream
        if stream is not None:
            stream.begin_attempt()
        if say.delay:
            await anyio.sleep(say.delay)
        if stream is not None and say.text:
            for chunk in say.chunks or [say.text]:
                stream.observe(chunk)
                await anyio.sleep(0.01)
        return ModelTurnResult(content=say.text, tool_calls=list(say.calls))


def tool_answers(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Tool call id -> the tool message content, parsed when it is JSON."""
    out: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool":
            content = message["content"]
            try:
                out[message["tool_call_id"]] = json.loads(content)
            except ValueError:
                out[message["tool_call_id"]] = content
    return out
