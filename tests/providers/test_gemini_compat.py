"""Tool calls another provider made reach Gemini's OpenAI-compatible endpoint with the stand-in.

Gemini 3 refuses a turn whose tool calls carry no ``thought_signature``
(``extra_content.google.thought_signature`` on that wire); the fake plays it
(``FakeOpenAIServer.gemini_signatures``). Real SDKs, the fakes, both backends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fallback_cases import fallback_model, lookup_loop
from hypothesis import given, settings
from hypothesis import strategies as st

from juno_bind_trio.completion import ListSink
from juno_bind_trio.loop import LoopState, ToolLoop
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.openai import (
    OpenAIChatAdapter,
    OpenAIChatModel,
    open_openai_client,
)
from juno_bind_trio.providers.openai._gemini import PLACEHOLDER_SIGNATURE, with_placeholders
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeOpenAIServer,
    FakeResponse,
    Finish,
    LoopbackServer,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    open_fake_anthropic_server,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

ORIGIN = "https://gemini.example/v1beta/openai/"


def call(call_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"q": "tides"}'},
        **extra,
    }


def signature_of(call: dict[str, Any]) -> object:
    return call.get("extra_content", {}).get("google", {}).get("thought_signature")


def two_calls(first: str, second: str) -> StreamResponse:
    return StreamResponse(
        [
            ReasoningDelta("I should look it up."),
            ToolCallDelta(0, id=first, name="lookup", arguments=json.dumps({"q": "tides"})),
            ToolCallDelta(1, id=second, name="lookup", arguments=json.dumps({"q": "moon"})),
            Finish("tool_calls"),
        ]
    )


@asynccontextmanager
async def claude_then_gemini(
    claude_script: Sequence[FakeResponse],
    gemini_script: Sequence[FakeResponse],
    *,
    gemini_compat: bool | None = True,
) -> AsyncIterator[tuple[RoutedModel, LoopbackServer, FakeOpenAIServer]]:
    async with (
        open_fake_anthropic_server(claude_script) as claude,
        open_fake_openai_server(gemini_script) as gemini,
        open_anthropic_client(base_url=claude.base_url, api_key="a") as claude_client,
        open_openai_client(base_url=gemini.base_url, api_key="g") as gemini_client,
    ):
        gemini.gemini_signatures = True
        model = fallback_model(
            ("claude-test", "anthropic", AnthropicAdapter(claude_client)),
            # A proxy in front of Gemini: its host does not say so.
            (
                "gemini-3-pro",
                "gemini-compat",
                OpenAIChatAdapter(gemini_client, gemini_compat=gemini_compat),
            ),
            request_options={"max_tokens": 256},
        )
        yield model, claude, gemini


def tool_loop(model: RoutedModel, state: LoopState) -> ToolLoop:
    return lookup_loop(model, state, ListSink())


async def test_anthropic_dies_mid_tool_loop_and_gemini_compat_takes_its_calls() -> None:
    claude_script = [
        two_calls("toolu_1", "toolu_2"),
        StreamResponse([TextDelta("High tide is"), Disconnect()]),
    ]
    gemini_script = [StreamResponse.of_text("Noon, give or take.")]
    async with claude_then_gemini(claude_script, gemini_script) as (model, _claude, gemini):
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await tool_loop(model, state).run()
    assert result.content == "Noon, give or take."
    request = gemini.requests[0]
    assert not isinstance(request.response, ErrorResponse)
    sent = request.json["messages"][1]
    assert all(PROVIDER_STATE_KEY not in m for m in request.json["messages"])
    # The stand-in on the first call only, the one Gemini signs in a step.
    assert [signature_of(c) for c in sent["tool_calls"]] == [PLACEHOLDER_SIGNATURE, None]
    # Written on the wire, never into the transcript.
    assert "extra_content" not in json.dumps(state.messages)


async def test_without_the_stand_in_gemini_refuses_the_fallback() -> None:
    claude_script = [
        two_calls("toolu_1", "toolu_2"),
        StreamResponse([TextDelta("High tide is"), Disconnect()]),
    ]
    gemini_script = [StreamResponse.of_text("never sent")]
    async with claude_then_gemini(claude_script, gemini_script, gemini_compat=False) as (
        model,
        _claude,
        gemini,
    ):
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        with pytest.raises(Exception, match="missing a thought_signature"):
            await tool_loop(model, state).run()
    assert isinstance(gemini.requests[0].response, ErrorResponse)
    assert gemini.requests[0].response.status == 400
    assert gemini.pending() == 1


async def test_gemini_compat_gets_its_own_signature_back_and_no_stand_in() -> None:
    gemini_script = [two_calls("call_1", "call_2"), StreamResponse.of_text("Noon.")]
    async with (
        open_fake_openai_server(gemini_script) as gemini,
        open_openai_client(base_url=gemini.base_url, api_key="g") as client,
    ):
        gemini.gemini_signatures = True
        model = RoutedModel(
            plan=RoutePlan([RouteStage("gemini-3-pro", [Candidate("g")])], max_retries=0),
            adapters={"g": OpenAIChatAdapter(client, gemini_compat=True)},
        )
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await tool_loop(model, state).run()
    assert result.content == "Noon."
    issued = signature_of(state.messages[1]["tool_calls"][0])
    assert isinstance(issued, str)
    assert issued != PLACEHOLDER_SIGNATURE
    sent = gemini.requests[1].json["messages"][1]["tool_calls"]
    assert [signature_of(c) for c in sent] == [issued, None]


def test_the_stand_in_goes_on_foreign_call_turns_only() -> None:
    foreign = {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]}
    ours = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c")],  # Gemini made it and signed none: sent as it came
        PROVIDER_STATE_KEY: {"provider": "openai", "origin": ORIGIN, "fields": []},
    }
    signed = {
        "role": "assistant",
        "tool_calls": [call("d", extra_content={"google": {"thought_signature": "sig"}})],
    }
    other_vendor = {
        "role": "assistant",
        "tool_calls": [call("e", extra_content={"acme": {"trace": 1}})],
    }
    plain = {"role": "assistant", "content": "no calls"}
    original: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        foreign,
        ours,
        signed,
        other_vendor,
        plain,
    ]
    outgoing = [{k: v for k, v in m.items() if k != PROVIDER_STATE_KEY} for m in original]
    before = json.dumps(outgoing)
    out = with_placeholders(original, outgoing, ORIGIN)
    assert json.dumps(outgoing) == before  # copies, the input untouched
    assert [signature_of(c) for c in out[1]["tool_calls"]] == [PLACEHOLDER_SIGNATURE, None]
    assert out[2] is outgoing[2]
    assert out[3] is outgoing[3]
    assert out[4]["tool_calls"][0]["extra_content"] == {
        "acme": {"trace": 1},
        "google": {"thought_signature": PLACEHOLDER_SIGNATURE},
    }
    assert out[5] is outgoing[5]
    # Signed by another endpoint: not this one's, so it gets the stand-in too.
    elsewhere = {**ours, PROVIDER_STATE_KEY: {"provider": "openai", "origin": "https://x/"}}
    assert signature_of(with_placeholders([elsewhere], [ours], ORIGIN)[0]["tool_calls"][0])
    nothing = [{"role": "user", "content": "q"}, plain]
    assert with_placeholders(nothing, nothing, ORIGIN) is nothing


async def test_a_gemini_base_url_is_recognised_and_the_option_overrides_it() -> None:
    async with (
        open_openai_client(
            base_url="https://generativelanguage.googleapis.com/v1beta/openai/", api_key="g"
        ) as gemini,
        open_openai_client(base_url="https://api.openai.com/v1", api_key="o") as gpt,
    ):
        assert OpenAIChatAdapter(gemini).gemini_compat is True
        assert OpenAIChatAdapter(gemini, gemini_compat=False).gemini_compat is False
        assert OpenAIChatAdapter(gpt).gemini_compat is False
        assert OpenAIChatAdapter(gpt, gemini_compat=True).gemini_compat is True
        with pytest.raises(TypeError, match="gemini_compat must be a bool or None"):
            OpenAIChatAdapter(gpt, gemini_compat="yes")  # type: ignore[arg-type]
        plan = RoutePlan([RouteStage("m", [Candidate("gpt"), Candidate("proxy")])])
        model = OpenAIChatModel(
            plan=plan, clients={"gpt": gpt, "proxy": gpt}, gemini_compat_providers={"proxy"}
        )
        derived = model.with_request_options(temperature=0)
        adapters = [m._router.adapters for m in (model, derived)]
        for held in adapters:
            assert held["proxy"].gemini_compat is True  # type: ignore[attr-defined]
            assert held["gpt"].gemini_compat is False  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match=r"names \['nope'\], which clients has not"):
            OpenAIChatModel(
                plan=plan, clients={"gpt": gpt, "proxy": gpt}, gemini_compat_providers={"nope"}
            )
        with pytest.raises(TypeError, match="collection of provider names"):
            OpenAIChatModel(
                plan=plan,
                clients={"gpt": gpt, "proxy": gpt},
                gemini_compat_providers="proxy",  # a str is a collection, of letters
            )


_SIGNATURES = st.none() | st.sampled_from(["sig", PLACEHOLDER_SIGNATURE])
_CALL = st.builds(
    lambda call_id, signature, other: call(
        call_id,
        **(
            {}
            if signature is None and not other
            else {
                "extra_content": {
                    **({"acme": {"x": 1}} if other else {}),
                    **({"google": {"thought_signature": signature}} if signature else {}),
                }
            }
        ),
    ),
    st.text("abc", min_size=1, max_size=3),
    _SIGNATURES,
    st.booleans(),
)
_STATE = st.sampled_from(
    [
        None,
        {"provider": "openai", "origin": ORIGIN, "fields": []},
        {"provider": "openai", "origin": "https://elsewhere/v1/", "fields": []},
        {"provider": "anthropic"},
    ]
)
_MESSAGE = st.one_of(
    st.just({"role": "user", "content": "q"}),
    st.builds(
        lambda calls, state: {
            "role": "assistant",
            "content": None,
            **({"tool_calls": calls} if calls else {}),
            **({PROVIDER_STATE_KEY: state} if state else {}),
        },
        st.lists(_CALL, max_size=3),
        _STATE,
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_MESSAGE, max_size=6))
def test_every_foreign_call_turn_leads_with_a_signature_and_nothing_else_changes(
    original: list[dict[str, Any]],
) -> None:
    outgoing = [{k: v for k, v in m.items() if k != PROVIDER_STATE_KEY} for m in original]
    before = json.dumps(outgoing)
    out = with_placeholders(original, outgoing, ORIGIN)
    assert json.dumps(outgoing) == before
    assert len(out) == len(outgoing)
    for message, sent, got in zip(original, outgoing, out, strict=True):
        state = message.get(PROVIDER_STATE_KEY)
        ours = isinstance(state, dict) and state.get("origin") == ORIGIN
        calls = sent.get("tool_calls") or []
        if ours or not calls or signature_of(calls[0]) is not None:
            assert got is sent
            continue
        assert signature_of(got["tool_calls"][0]) == PLACEHOLDER_SIGNATURE
        assert got["tool_calls"][1:] == calls[1:]
        first = {k: v for k, v in got["tool_calls"][0].items() if k != "extra_content"}
        assert first == {k: v for k, v in calls[0].items() if k != "extra_content"}
        kept = {k: v for k, v in got["tool_calls"][0]["extra_content"].items() if k != "google"}
        assert kept == {k: v for k, v in calls[0].get("extra_content", {}).items() if k != "google"}
        assert {k: v for k, v in got.items() if k != "tool_calls"} == {
            k: v for k, v in sent.items() if k != "tool_calls"
        }
