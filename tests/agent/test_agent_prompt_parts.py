"""A prompt may be a list of content parts (text and images), sent as the user message."""

from __future__ import annotations

from typing import Any

import pytest

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio

PARTS: list[dict[str, Any]] = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
]


async def test_content_parts_reach_the_provider_as_the_user_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with open_fake_openai_server([StreamResponse.of_text("A cat.")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        given = [dict(part) for part in PARTS]
        result = await Agent("openai:m", instructions="Be brief.").run(given)
        given[0]["text"] = "changed afterwards"
    assert result.output == "A cat."
    (body,) = (r.json for r in server.requests)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": PARTS},
    ]
    assert result.messages[1] == {"role": "user", "content": PARTS}


async def _model(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="x")


@pytest.mark.parametrize(
    ("prompt", "pattern"),
    [
        (None, r"prompt must be a str or a non-empty list of content parts"),
        ([], r"prompt must be a str or a non-empty list"),
        (b"hi", r"prompt must be a str or a non-empty list"),
        ({"type": "text", "text": "hi"}, r"prompt must be a str or a non-empty list"),
        (["hi"], r"prompt\[0\] must be a content part dict with a string 'type'"),
        ([{"text": "hi"}], r"prompt\[0\] must be a content part dict"),
    ],
)
async def test_a_bad_prompt_is_refused_naming_it(prompt: Any, pattern: str) -> None:
    agent = Agent(_model)
    error = ValueError if prompt == [] else TypeError  # an empty list is a wrong value
    with pytest.raises(error, match=r"^Agent.run: " + pattern):
        await agent.run(prompt)
    with pytest.raises(error, match=r"^Agent.open_run: " + pattern):
        agent.open_run(prompt)
