"""Gemini's lean request is the SDK path's request, byte for byte.

The lean path builds the contents, the system instruction and the function
declarations in the API's shape itself (``providers/google/_wire.py``) and
gives the SDK's request builder placeholders for them; the ``"sdk"`` path
hands everything to ``generate_content_stream``. Here both send the same
random conversations (text, images, tool calls with and without Gemini's
signatures, other providers' state, tool results, thoughts), tools with JSON
schemas and request options through the real ``google-genai`` to the fake
Gemini server, and the bodies it received must be the same bytes.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from juno_bind_trio.providers import ProviderRequest
from juno_bind_trio.providers.google import GeminiAdapter, open_gemini_client
from juno_bind_trio.providers.google._wire import wire_contents, wire_tools
from juno_bind_trio.testing import StreamResponse, open_fake_gemini_server

pytestmark = pytest.mark.anyio

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=10)
_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAME, inner, max_size=3),
    max_leaves=6,
)
_SIGNATURE = st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode())
_CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
_IMAGE = st.one_of(
    st.binary(max_size=9).map(
        lambda b: {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(b).decode()},
        }
    ),
    st.just({"type": "image_url", "image_url": "https://example.test/a.png"}),
)
_USER = st.fixed_dictionaries(
    {
        "role": st.just("user"),
        "content": _TEXT
        | st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}) | _IMAGE, max_size=3
        ),
    }
)
_SYSTEM = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer"]), "content": _TEXT}
)
_ARGUMENTS = st.one_of(
    st.dictionaries(_NAME, _JSON, max_size=3).map(json.dumps),
    st.just("{broken"),
    st.none(),
)
_TOOL_CALL: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "id": _CALL_IDS,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": _NAME, "arguments": _ARGUMENTS}),
    }
)
_GOOGLE_STATE = st.fixed_dictionaries(
    {"provider": st.just("google")},
    optional={
        "calls": st.dictionaries(_CALL_IDS, _SIGNATURE | st.just("not base64!"), max_size=3),
        "text": _SIGNATURE,
        "thoughts": st.lists(
            st.fixed_dictionaries({"text": _TEXT, "signature": _SIGNATURE}), max_size=2
        ),
        "ids": st.lists(_CALL_IDS, max_size=3, unique=True),
    },
)
_OTHER_STATE = st.fixed_dictionaries(
    {"provider": st.sampled_from(["anthropic", "openai"]), "signature": _SIGNATURE}
)
_ASSISTANT: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"role": st.just("assistant"), "content": _TEXT | st.none()},
    optional={
        "tool_calls": st.lists(_TOOL_CALL, max_size=3, unique_by=lambda c: c["id"]),
        "provider_state": _GOOGLE_STATE | _OTHER_STATE,
    },
)
_TOOL_RESULT = st.fixed_dictionaries(
    {
        "role": st.just("tool"),
        "tool_call_id": _CALL_IDS | st.just("unknown"),
        "content": _TEXT.map(lambda t: "Error: " + t) | _TEXT,
    },
    optional={"name": _NAME},
)
_MESSAGE: st.SearchStrategy[dict[str, Any]] = st.one_of(_USER, _SYSTEM, _ASSISTANT, _TOOL_RESULT)

_LEAF_SCHEMA = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "description": _TEXT,
            "enum": st.lists(_NAME, min_size=1, max_size=3),
            "format": st.sampled_from(["date-time", "email"]),
            "maxLength": st.integers(0, 99),
            "pattern": st.just("^a"),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["integer", "number"])},
        optional={
            "minimum": st.integers(-9, 9) | st.floats(-9, 9),
            "maximum": st.integers(10, 99),
            "const": st.integers(0, 3),
            "default": st.integers(0, 3),
        },
    ),
    st.fixed_dictionaries({"type": st.just("boolean")}, optional={"title": _TEXT}),
    st.fixed_dictionaries({"anyOf": st.just([{"type": "string"}, {"type": "null"}])}),
    st.fixed_dictionaries({"type": st.just(["integer", "null"])}),
)
_SCHEMA: st.SearchStrategy[dict[str, Any]] = st.recursive(
    _LEAF_SCHEMA,
    lambda inner: (
        st.fixed_dictionaries(
            {"type": st.just("array"), "items": inner}, optional={"minItems": st.integers(0, 3)}
        )
        | st.fixed_dictionaries(
            {
                "type": st.just("object"),
                "properties": st.dictionaries(_NAME, inner, min_size=1, max_size=3),
            },
            optional={"additionalProperties": st.just(False)},
        )
    ),
    max_leaves=5,
)
_TOOL: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": _NAME,
                "parameters": st.fixed_dictionaries(
                    {
                        "type": st.just("object"),
                        "properties": st.dictionaries(_NAME, _SCHEMA, max_size=3),
                    },
                    optional={"required": st.lists(_NAME, max_size=2, unique=True)},
                ),
            },
            optional={"description": _TEXT},
        ),
    }
)
_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.floats(0, 2),
        "max_tokens": st.integers(1, 4096),
        "top_k": st.integers(1, 40),
        "stop": _TEXT | st.lists(_TEXT, min_size=1, max_size=2),
        "seed": st.integers(0, 99),
        "tool_choice": st.sampled_from(["auto", "required", "none"]),
        "parallel_tool_calls": st.booleans(),
        "thinking_config": st.just({"thinking_budget": 128, "include_thoughts": True}),
        "safety_settings": st.just(
            [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]
        ),
        "response_format": st.sampled_from(
            [
                {"type": "json_object"},
                {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "o",
                        "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                    },
                },
            ]
        ),
        "custom_field": _JSON,  # not Gemini's or OpenAI's: sent in the body as it is
    },
)


async def _sent(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], options: dict[str, Any]
) -> list[tuple[str, bytes | str]]:
    """What each path sent (the body) or raised (the exception), lean first."""
    request = ProviderRequest(
        model="gemini-test",
        messages=messages,
        tools=tools,
        options=options,
        time_to_first_token=30,
        inter_chunk_timeout=30,
    )
    script = [StreamResponse.of_text("ok"), StreamResponse.of_text("ok")]
    out: list[tuple[str, bytes | str]] = []
    async with (
        open_fake_gemini_server(script, validate_history=False) as server,
        open_gemini_client(base_url=server.base_url, api_key="k") as client,
    ):
        for path in ("lean", "sdk"):
            adapter = GeminiAdapter(client, stream_path=path)
            assert adapter.stream_path == path
            seen = len(server.requests)
            try:
                await adapter.stream_turn(request)
            except Exception as error:
                out.append(("raised", f"{type(error).__name__}: {error}"))
                assert len(server.requests) == seen
            else:
                received = server.requests[-1]
                out.append((received.target, received.body))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=7),
    tools=st.lists(_TOOL, max_size=3, unique_by=lambda t: t["function"]["name"]),
    options=_OPTIONS,
)
async def test_a_request_is_the_same_bytes_on_both_paths(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], options: dict[str, Any]
) -> None:
    lean, sdk = await _sent(messages, tools, options)
    assert lean == sdk


async def test_a_tool_loop_request_is_the_same_bytes_and_carries_the_signatures() -> None:
    signature = base64.b64encode(b"\xfb\xff\xbf sig").decode()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "w", "arguments": '{"c": "Oslo"}'},
                }
            ],
            "provider_state": {"provider": "google", "calls": {"c1": signature}, "ids": ["c1"]},
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Error: no such city"},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "w",
                "parameters": {"type": "object", "properties": {"c": {"type": "string"}}},
            },
        }
    ]
    (_, lean), (_, sdk) = await _sent(messages, tools, {"tool_choice": "auto"})
    assert lean == sdk
    assert isinstance(lean, bytes)
    body = json.loads(lean)
    call = body["contents"][1]["parts"][0]
    assert call == {
        "functionCall": {"id": "c1", "args": {"c": "Oslo"}, "name": "w"},
        "thoughtSignature": base64.urlsafe_b64encode(b"\xfb\xff\xbf sig").decode(),
    }
    assert list(body) == [
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
    ]


async def test_a_conversation_with_no_contents_is_refused_on_both_paths_alike() -> None:
    lean, sdk = await _sent([{"role": "system", "content": "only this"}], [], {})
    assert lean == sdk
    assert lean[0] == "raised"


def test_what_the_builder_does_not_know_goes_to_the_sdk() -> None:
    assert wire_contents([{"role": "user", "parts": [{"text": 1}]}]) is None
    assert wire_contents([{"role": "user", "parts": [{"video_metadata": {}}]}]) is None
    assert wire_tools([{"google_search": {}}]) is None
    assert wire_tools([{"function_declarations": [{"name": "f"}]}, {"code_execution": {}}]) is None
    declaration = {"name": "f", "parameters": {"type": "object", "title": "T"}}
    assert wire_tools([{"function_declarations": [declaration]}]) is None
    assert wire_tools([{"function_declarations": [{"name": "f"}]}]) == [
        {"functionDeclarations": [{"name": "f"}]}
    ]
