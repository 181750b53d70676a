"""ToolCall: one value per call, read as either wire shape, its arguments parsed under one rule."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from juno_bind_trio import ToolCallArgumentsError
from juno_bind_trio.completion import parse_tool_call_arguments, tool_call_arguments_absent
from juno_bind_trio.run import (
    ToolBatch,
    ToolCall,
    assistant_message,
    canonical_json,
    tool_call_args_hash,
    tool_call_arguments,
    tool_call_id,
    tool_call_name,
    tool_message,
)


def wire(
    call_id: str = "c1", name: str = "f", arguments: str = "{}", **extra: Any
) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
        **extra,
    }


# --- building one ----------------------------------------------------------------------


def test_the_fields_and_both_shapes_it_reads_as() -> None:
    call = ToolCall("c1", "search", '{"q": "x"}')
    assert (call.id, call.name, call.arguments, dict(call.extra)) == (
        "c1",
        "search",
        '{"q": "x"}',
        {},
    )
    # The wire mapping, as a host's dispatcher reads it.
    assert call["id"] == "c1"
    assert call["type"] == "function"
    assert call["function"]["arguments"] == '{"q": "x"}'
    assert dict(call) == wire("c1", "search", '{"q": "x"}')
    assert call.get("index") is None
    assert "function" in call
    assert "index" not in call
    assert len(call) == 3
    # The openai SDK's object, as another host's dispatcher reads it.
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("search", '{"q": "x"}')
    # The package's accessors read it too.
    assert (tool_call_id(call), tool_call_name(call), tool_call_arguments(call)) == (
        "c1",
        "search",
        '{"q": "x"}',
    )


def test_of_reads_a_mapping_and_keeps_a_providers_fields() -> None:
    signature = {"google": {"thought_signature": "abc=="}}
    given_call = wire("c1", "f", "{}", extra_content=signature, index=0)
    call = ToolCall.of(given_call)
    # The provider's field is the call's; a stream's delta index is not.
    assert dict(call.extra) == {"extra_content": signature}
    assert call["extra_content"] == signature
    assert call.to_wire() == wire("c1", "f", "{}", extra_content=signature)
    assert list(call) == ["id", "type", "function", "extra_content"]
    with pytest.raises(TypeError):
        call.extra["x"] = 1  # type: ignore[index]


def test_of_reads_the_sdks_object_and_its_extra_fields() -> None:
    sdk = ChatCompletionMessageFunctionToolCall.model_validate(
        {
            "id": "c9",
            "type": "function",
            "function": {"name": "g", "arguments": '{"a": 1}'},
            "extra_content": {"google": {"thought_signature": "sig"}},
        }
    )
    call = ToolCall.of(sdk)
    assert (call.id, call.name, call.arguments) == ("c9", "g", '{"a": 1}')
    assert dict(call.extra) == {"extra_content": {"google": {"thought_signature": "sig"}}}


def test_of_a_tool_call_is_that_call() -> None:
    call = ToolCall("c1", "f")
    assert ToolCall.of(call) is call


NUMBERED_FIELD: dict[Any, Any] = {**wire(), 3: "x"}


@pytest.mark.parametrize(
    ("given_call", "error", "message"),
    [
        ({"id": "c1"}, TypeError, r"ToolCall.of: expected a function tool call"),
        (wire(call_id=3), TypeError, r"ToolCall.of: expected a function tool call"),  # type: ignore[arg-type]
        ({**wire(), "type": "custom"}, TypeError, r"expected a function tool call"),
        ("c1", TypeError, r"expected a function tool call"),
        (wire(call_id=""), ValueError, r"ToolCall.of: a tool call has an empty id"),
        (NUMBERED_FIELD, TypeError, r"a provider field's name must be a str"),
    ],
)
def test_of_refuses_what_is_not_a_function_call(
    given_call: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ToolCall.of(given_call)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("", "f"), {}, ValueError, r"ToolCall: id must be a non-empty string"),
        ((1, "f"), {}, TypeError, r"ToolCall: id must be a str, got 1"),
        (("c", None), {}, TypeError, r"ToolCall: name must be a str, got None"),
        (("c", "f", b"{}"), {}, TypeError, r"ToolCall: arguments must be a str"),
        (("c", "f"), {"extra": []}, TypeError, r"ToolCall: extra must be a mapping"),
        (("c", "f"), {"extra": {"id": "x"}}, ValueError, r"ToolCall: extra cannot hold 'id'"),
        (("c", "f"), {"extra": {"index": 0}}, ValueError, r"extra cannot hold 'index'"),
        (("c", "f"), {"extra": {1: 0}}, TypeError, r"an extra field's name must be a str"),
    ],
)
def test_the_constructor_names_what_is_wrong(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ToolCall(*args, **kwargs)


def test_equality_copy_and_pickle() -> None:
    call = ToolCall("c1", "f", '{"a": 1}', extra={"extra_content": {"k": "v"}})
    assert call == wire("c1", "f", '{"a": 1}', extra_content={"k": "v"})
    assert wire("c1", "f", '{"a": 1}', extra_content={"k": "v"}) == call
    assert call != wire("c1", "f", '{"a": 1}')
    assert call != ToolCall("c1", "f", '{"a": 2}')
    assert call == ToolCall("c1", "f", '{"a": 1}', extra={"extra_content": {"k": "v"}})
    again = pickle.loads(pickle.dumps(call))
    assert again == call
    assert dict(again.extra) == dict(call.extra)
    assert copy.deepcopy(call) == call
    assert "extra_content" in repr(call)


def test_to_wire_is_a_fresh_plain_dict_every_time() -> None:
    call = ToolCall("c1", "f", "{}", extra={"extra_content": {"k": "v"}})
    first = call.to_wire()
    first["function"]["arguments"] = "changed"
    assert call.to_wire()["function"]["arguments"] == "{}"
    assert type(call.to_wire()) is dict
    assert json.loads(json.dumps(call.to_wire())) == call


def test_a_batch_reads_its_calls_ids_and_tools() -> None:
    batch: ToolBatch[Any] = ToolBatch([ToolCall("a", "x"), ToolCall("b", "y"), wire("c", "x")])
    assert batch.statistics().total == 3
    with pytest.raises(ValueError, match="unique"):
        ToolBatch([ToolCall("a", "x"), ToolCall("a", "y")])


# --- the arguments rule -------------------------------------------------------------------

ABSENT = ["", "   ", "\n\t", "null", " null "]


@pytest.mark.parametrize("raw", [*ABSENT, "{}", " {} "])
def test_no_arguments_parse_to_an_empty_object(raw: str) -> None:
    assert ToolCall("c", "f", raw).parsed == {}
    assert parse_tool_call_arguments(raw) == {}
    assert tool_call_arguments_absent(raw) is (raw.strip() != "{}")


@pytest.mark.parametrize(
    ("raw", "found"),
    [
        ("[1, 2]", "an array"),
        ("42", "a JSON number"),
        ('"x"', "a JSON string"),
        ("true", "a JSON boolean"),
        ('{"a": NaN}', "not valid JSON"),
        ('{"a": 1e400}', "not valid JSON"),
        ('{"a": ', "not valid JSON"),
        ("[" * 600 + "]" * 600, "not valid JSON"),
    ],
)
def test_what_is_not_an_object_is_refused_on_every_read(raw: str, found: str) -> None:
    call = ToolCall("c", "f", raw)
    for _ in range(2):
        with pytest.raises(ToolCallArgumentsError, match=found) as caught:
            call.parsed  # noqa: B018
        assert caught.value.arguments == raw
        assert caught.value.kind == "unparseable_tool_arguments"


def test_the_parse_is_made_once_and_shared() -> None:
    call = ToolCall("c", "f", '{"a": [1, 2]}')
    assert call.parsed is call.parsed


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4), st.booleans())
def test_the_value_and_the_functions_agree_on_every_object(
    args: dict[str, Any], spaced: bool
) -> None:
    raw = json.dumps(args, indent=2 if spaced else None)
    call = ToolCall("c", "f", raw)
    assert call.parsed == parse_tool_call_arguments(raw) == args
    # The digest: the canonical hash of the parsed object, whatever the layout.
    assert call.digest == tool_call_args_hash(args)
    reordered = json.dumps(dict(reversed(list(args.items()))))
    assert ToolCall("c", "f", reordered).digest == call.digest


@given(st.text(max_size=30))
def test_any_text_parses_or_is_refused_and_always_has_a_digest(raw: str) -> None:
    call = ToolCall("c", "f", raw)
    try:
        parsed = call.parsed
    except ToolCallArgumentsError:
        # Refused text is hashed as the text: a stable key for a malformed call.
        assert call.digest == tool_call_args_hash(raw)
    else:
        assert call.digest == tool_call_args_hash(parsed)
        assert parsed == parse_tool_call_arguments(raw)


def test_every_way_of_sending_nothing_has_one_digest() -> None:
    digests = {ToolCall("c", "f", raw).digest for raw in [*ABSENT, "{}", "{ }"]}
    assert digests == {tool_call_args_hash({})}
    assert ToolCall("c", "f", '"{}"').digest == tool_call_args_hash('"{}"')
    assert ToolCall("c", "f", '"{}"').digest != tool_call_args_hash({})
    assert canonical_json({}) == "{}"


# --- the two messages ----------------------------------------------------------------------


def test_assistant_message_writes_calls_in_their_wire_form_and_extras_last() -> None:
    calls = [ToolCall("c1", "f", "{}", extra={"extra_content": {"k": 1}}), wire("c2", "g", "")]
    message = assistant_message("on it", calls, reasoning_content="because")
    assert message == {
        "role": "assistant",
        "content": "on it",
        "tool_calls": [wire("c1", "f", "{}", extra_content={"k": 1}), wire("c2", "g", "")],
        "reasoning_content": "because",
    }
    assert list(message) == ["role", "content", "tool_calls", "reasoning_content"]
    assert all(type(c) is dict for c in message["tool_calls"])
    # No calls, no tool_calls key: the API refuses an empty list.
    assert assistant_message(None) == {"role": "assistant", "content": None}
    assert assistant_message("x", ()) == {"role": "assistant", "content": "x"}
    # Positional parameters leave every name free for a provider's field.
    assert assistant_message("x", (), calls=1)["calls"] == 1


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((3,), {}, TypeError, r"assistant_message: content must be a str or None, got 3"),
        (("x", wire()), {}, TypeError, r"assistant_message: calls must be a sequence"),
        (("x", [{"id": "a"}]), {}, TypeError, r"assistant_message: ToolCall.of: expected"),
        (("x", [wire(call_id="")]), {}, ValueError, r"assistant_message: .*empty id"),
        (("x",), {"role": "user"}, ValueError, r"cannot be named \['role'\]"),
        (("x",), {"tool_calls": []}, ValueError, r"cannot be named \['tool_calls'\]"),
    ],
)
def test_assistant_message_refuses(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        assistant_message(*args, **kwargs)


def test_tool_message() -> None:
    assert tool_message("c1", "ok") == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    parts = [{"type": "text", "text": "ok"}]
    assert tool_message("c1", parts)["content"] is parts
    with pytest.raises(TypeError, match=r"tool_message: call_id must be a str, got 1"):
        tool_message(1, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"tool_message: call_id must not be empty"):
        tool_message("", "x")
    with pytest.raises(TypeError, match=r"tool_message: content must be a str or a list"):
        tool_message("c1", {"a": 1})  # type: ignore[arg-type]
