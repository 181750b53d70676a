"""Helpers shared by the transcript tests: message builders and the provider rule."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from juno_bind_trio import ABORTED_TOOL_CALL_MESSAGE, INTERRUPTED_TOOL_CALL_MESSAGE


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str = "be brief") -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(*call_ids: str, text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call_ids:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for c in call_ids
        ]
    return message


def tool(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def synthesized(call_id: str, kind: str) -> dict[str, Any]:
    """The answer healing must write, built independently of the library."""
    error = INTERRUPTED_TOOL_CALL_MESSAGE if kind == "interrupted" else ABORTED_TOOL_CALL_MESSAGE
    content = '{"success":false,"kind":"%s","error":"%s"}' % (kind, error)  # noqa: UP031
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def call_ids(message: Mapping[str, Any]) -> list[str]:
    return [c["id"] for c in message.get("tool_calls") or []]


def assert_provider_rule(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every assistant tool call is answered by exactly one tool message, immediately after it.

    The strictest form providers enforce: the answers form a contiguous block
    right after the assistant message (nothing else in between), the block
    answers each call exactly once, and no tool message appears anywhere else.
    """
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"tool message outside any block at {i}: {message}"
        i += 1
        calls = call_ids(message) if message["role"] == "assistant" else []
        answered: list[str] = []
        while i < len(messages) and messages[i]["role"] == "tool":
            answered.append(messages[i]["tool_call_id"])
            i += 1
        assert sorted(answered) == sorted(calls), (calls, answered)


def envelope(message: Mapping[str, Any]) -> dict[str, Any]:
    parsed = json.loads(message["content"])
    assert isinstance(parsed, dict)
    return parsed
