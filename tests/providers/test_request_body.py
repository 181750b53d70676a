"""The lean path's request is the SDK path's request, byte for byte.

The lean stream path sends the messages (or input items) and the tools it
built as ``extra_body``, past the SDK's parameter walk (``providers/openai/_body.py``);
the ``"sdk"`` path hands everything to the SDK as its signature asks. Here both
send the same random conversations, tools and request options through the
real ``openai`` SDK to the loopback fakes, and the bodies the servers received
must be the same bytes, with the same headers but the one the SDK adds for a
response it leaves unread.
"""

from __future__ import annotations

import types
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from juno_bind_trio.providers import ProviderRequest
from juno_bind_trio.providers.openai import (
    OpenAIResponsesAdapter,
    open_openai_client,
    stream_chat_completion,
)
from juno_bind_trio.providers.openai._body import past_the_transform
from juno_bind_trio.testing import ProviderRequest as ReceivedRequest
from juno_bind_trio.testing import (
    RecordedRequest,
    StreamResponse,
    open_fake_openai_server,
    open_fake_responses_server,
)

pytestmark = pytest.mark.anyio

# with_streaming_response asks the SDK to leave the body unread by this header.
_PATH_HEADERS = frozenset({"x-stainless-raw-response"})

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAME, inner, max_size=3),
    max_leaves=6,
)
_CALL = st.fixed_dictionaries(
    {
        "id": _NAME.map(lambda n: f"call_{n}"),
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": _NAME, "arguments": st.just('{"a": 1}')}),
    }
)
_MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": _TEXT}),
    st.fixed_dictionaries(
        {
            "role": st.just("user"),
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
                min_size=1,
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": _TEXT}),
)
_TOOL: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": _NAME,
                "description": _TEXT,
                "parameters": st.fixed_dictionaries(
                    {
                        "type": st.just("object"),
                        "properties": st.dictionaries(
                            _NAME, st.just({"type": "string"}), max_size=3
                        ),
                    }
                ),
            }
        ),
    }
)
_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.floats(0, 2, allow_nan=False),
        "max_tokens": st.integers(1, 4096),
        "metadata": st.dictionaries(_NAME, _TEXT, max_size=2),
        "stop": st.lists(_TEXT, min_size=1, max_size=2),
        "response_format": st.just(
            {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}}
        ),
        # A caller's own extra_body: a key of its own, and one overriding what the
        # package built (the caller has the last word on both paths).
        "extra_body": st.fixed_dictionaries(
            {}, optional={"custom": _JSON, "messages": st.lists(_MESSAGE, max_size=1)}
        ),
    },
)


def _same_request(
    lean: RecordedRequest | ReceivedRequest, sdk: RecordedRequest | ReceivedRequest
) -> None:
    assert lean.body == sdk.body
    assert lean.target == sdk.target
    lean_headers = {k: v for k, v in lean.headers if k.lower() not in _PATH_HEADERS}
    sdk_headers = {k: v for k, v in sdk.headers if k.lower() not in _PATH_HEADERS}
    # A header that differs between any two requests of one client (a retry
    # count is always 0 here) would show up here, and does not.
    assert lean_headers == sdk_headers


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=5),
    tools=st.lists(_TOOL, max_size=3, unique_by=lambda t: t["function"]["name"]),
    options=_OPTIONS,
)
async def test_a_chat_request_is_the_same_bytes_on_both_paths(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], options: dict[str, Any]
) -> None:
    script = [StreamResponse.of_text("ok"), StreamResponse.of_text("ok")]
    async with (
        open_fake_openai_server(script, validate_history=False) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        for path in ("lean", "sdk"):
            await stream_chat_completion(
                client,
                model="m",
                messages=messages,
                tools=tools,
                request_options=options,
                stream_path=path,
            )
    lean, sdk = server.requests
    _same_request(lean, sdk)
    body = lean.json
    expected = options.get("extra_body", {}).get("messages", messages)
    assert body["messages"] == expected
    assert body.get("tools", []) == tools


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=5),
    tools=st.lists(_TOOL, max_size=3, unique_by=lambda t: t["function"]["name"]),
    options=_OPTIONS,
)
async def test_a_responses_request_is_the_same_bytes_on_both_paths(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], options: dict[str, Any]
) -> None:
    options = {k: v for k, v in options.items() if k != "stop"}  # not a Responses option
    request = ProviderRequest(
        model="gpt-test",
        messages=messages,
        tools=tools,
        options=options,
        time_to_first_token=30,
        inter_chunk_timeout=30,
    )
    script = [StreamResponse.of_text("ok"), StreamResponse.of_text("ok")]
    async with (
        open_fake_responses_server(script, validate_history=False) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        for path in ("lean", "sdk"):
            await OpenAIResponsesAdapter(client, stream_path=path).stream_turn(request)
    lean, sdk = server.requests
    _same_request(lean, sdk)
    assert len(lean.json["tools"] if tools else []) == len(tools)


def test_the_built_values_leave_a_placeholder_in_their_place() -> None:
    messages = [{"role": "user", "content": "hi"}]
    arguments = past_the_transform(
        {"temperature": 0, "extra_body": {"seed": 1}}, {"messages": messages, "tools": ["t"]}
    )
    assert arguments == {
        "temperature": 0,
        "extra_body": {"messages": messages, "tools": ["t"], "seed": 1},
        "messages": [],
        "tools": [],
    }


def test_a_caller_extra_body_that_is_not_a_mapping_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"extra_body must be a mapping, got \[1\]"):
        past_the_transform({"extra_body": [1]}, {"messages": []})


async def test_the_lean_path_hands_the_sdk_walk_nothing_it_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bytes test above holds whether or not the walk is skipped; this one is what
    # fails if the built values go back through the SDK's transform on the lean path.
    import openai.resources.chat.completions.completions as chat_module
    import openai.resources.responses.responses as responses_module

    walked: list[dict[str, Any]] = []

    def recording(module: Any) -> None:
        real = module.async_maybe_transform

        async def walk(data: Any, expected_type: Any) -> Any:
            walked.append(dict(data))
            return await real(data, expected_type)

        monkeypatch.setattr(module, "async_maybe_transform", walk)

    recording(chat_module)
    recording(responses_module)
    messages = [{"role": "user", "content": "hi"}]
    tools = [
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    script = [StreamResponse.of_text("ok"), StreamResponse.of_text("ok")]
    async with (
        open_fake_openai_server(script, validate_history=False) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        for path in ("lean", "sdk"):
            await stream_chat_completion(
                client, model="m", messages=messages, tools=tools, stream_path=path
            )
    request = ProviderRequest(
        model="gpt-test",
        messages=messages,
        tools=tools,
        time_to_first_token=30,
        inter_chunk_timeout=30,
    )
    async with (
        open_fake_responses_server(script, validate_history=False) as responses_server,
        open_openai_client(base_url=responses_server.base_url, api_key="k") as client,
    ):
        for responses_path in ("lean", "sdk"):
            adapter = OpenAIResponsesAdapter(client, stream_path=responses_path)
            await adapter.stream_turn(request)
    chat_lean, chat_sdk, responses_lean, responses_sdk = walked
    assert (chat_lean["messages"], chat_lean["tools"]) == ([], [])
    assert (chat_sdk["messages"], len(chat_sdk["tools"])) == (messages, 1)
    assert (responses_lean["input"], responses_lean["tools"]) == ([], [])
    assert len(responses_sdk["input"]) == len(responses_sdk["tools"]) == 1


async def test_messages_and_tools_of_any_mapping_type_are_sent_as_the_sdk_sends_them() -> None:
    # The SDK's walk made a dict of every Mapping it met; the JSON encoder after it
    # takes dicts only. Read-only views of a host's transcript and schemas (here
    # MappingProxyType, at the top and nested) go out the same on both paths.
    frozen = types.MappingProxyType
    messages = [
        frozen({"role": "system", "content": "be brief"}),
        {"role": "user", "content": (frozen({"type": "text", "text": "hi"}),)},
    ]
    tools = [
        frozen(
            {
                "type": "function",
                "function": frozen(
                    {"name": "f", "parameters": frozen({"type": "object", "properties": {}})}
                ),
            }
        )
    ]
    script = [StreamResponse.of_text("ok"), StreamResponse.of_text("ok")]
    async with (
        open_fake_openai_server(script, validate_history=False) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        for path in ("lean", "sdk"):
            await stream_chat_completion(
                client, model="m", messages=messages, tools=tools, stream_path=path
            )
    lean, sdk = server.requests
    _same_request(lean, sdk)
    assert lean.json["messages"][1]["content"] == [{"type": "text", "text": "hi"}]
    assert lean.json["tools"][0]["function"]["name"] == "f"
    assert type(messages[0]) is frozen  # the caller's own values are left as they were


def test_plain_json_values_are_sent_as_they_are_not_copied() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    arguments = past_the_transform({}, {"messages": messages})
    assert arguments["extra_body"]["messages"] is messages


def _unfrozen(value: Any) -> Any:
    if isinstance(value, types.MappingProxyType | dict):
        return {k: _unfrozen(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_unfrozen(v) for v in value]
    return value


class _Items(list[Any]):
    """A host's own list type: written as a list, its items looked at."""


_FROZEN_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.lists(inner, max_size=3).map(_Items)
        | st.dictionaries(_NAME, inner, max_size=3)
        | st.dictionaries(_NAME, inner, max_size=3).map(types.MappingProxyType)
    ),
    max_leaves=10,
)


@given(value=_FROZEN_JSON)
def test_any_mapping_in_a_built_value_goes_out_as_the_dict_it_reads_as(value: Any) -> None:
    import json

    before = repr(value)
    sent = past_the_transform({}, {"messages": value})["extra_body"]["messages"]
    assert json.loads(json.dumps(sent)) == _unfrozen(value)
    assert repr(value) == before  # the caller's value untouched
    if not _holds_a_view(value):
        assert sent is value  # nothing to copy: not copied


def _holds_a_view(value: Any) -> bool:
    if isinstance(value, types.MappingProxyType):
        return True
    if isinstance(value, dict):
        return any(_holds_a_view(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_a_view(v) for v in value)
    return False
