"""Reading a tool call in either shape, and refusing a malformed one by name."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import trio
from openai.types.chat import ChatCompletionMessageCustomToolCall, ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_message_custom_tool_call import Custom
from openai.types.chat.chat_completion_message_function_tool_call import Function

from juno_bind_trio.run import (
    StopSignal,
    ToolCallLike,
    tool_call_arguments,
    tool_call_id,
    tool_call_name,
)


def as_dict(call_id: str = "call_1", name: str = "search", arguments: str = '{"q": 1}') -> Any:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def as_sdk(call_id: str = "call_1", name: str = "search", arguments: str = '{"q": 1}') -> Any:
    return ChatCompletionMessageToolCall(
        id=call_id, type="function", function=Function(name=name, arguments=arguments)
    )


@pytest.mark.parametrize("make", [as_dict, as_sdk], ids=["dict", "sdk"])
def test_accessors_read_both_shapes(make: Any) -> None:
    call: ToolCallLike = make("call_7", "fetch", '{"url": "x"}')
    assert tool_call_id(call) == "call_7"
    assert tool_call_name(call) == "fetch"
    assert tool_call_arguments(call) == '{"url": "x"}'


def test_a_mapping_may_leave_out_the_type() -> None:
    call = {"id": "c", "function": {"name": "n", "arguments": ""}}
    assert (tool_call_id(call), tool_call_name(call), tool_call_arguments(call)) == ("c", "n", "")


def test_arguments_are_returned_raw_never_parsed() -> None:
    broken = '{"q": '  # a model's truncated JSON is the caller's to handle
    assert tool_call_arguments(as_dict(arguments=broken)) == broken


MALFORMED: list[Any] = [
    None,
    "call_1",
    ["call_1"],
    {},
    {"id": "c"},
    {"id": "c", "type": "custom", "function": {"name": "n", "arguments": ""}},
    {"id": "c", "function": "search"},
    {"id": "c", "function": {"name": "n"}},
    {"id": "c", "function": {"arguments": "{}"}},
    {"id": 1, "function": {"name": "n", "arguments": ""}},
    {"id": "c", "function": {"name": None, "arguments": ""}},
    {"id": "c", "function": {"name": "n", "arguments": {"q": 1}}},
    ChatCompletionMessageCustomToolCall(
        id="c", type="custom", custom=Custom(name="grammar", input="x")
    ),
]


@pytest.mark.parametrize("call", MALFORMED, ids=repr)
@pytest.mark.parametrize("accessor", [tool_call_id, tool_call_name, tool_call_arguments])
def test_a_malformed_call_is_refused_naming_the_accessor_and_the_value(
    call: Any, accessor: Any
) -> None:
    with pytest.raises(TypeError) as info:
        accessor(call)
    message = str(info.value)
    assert message.startswith(f"{accessor.__name__}: expected a function tool call")
    assert message.endswith(f"got {call!r}")


@pytest.mark.anyio
async def test_cancel_scopes_satisfy_the_stop_signal_protocol(anyio_backend_name: str) -> None:
    # Read-only use is the whole contract: an unentered scope of either
    # library can be handed over and cancelled later.
    stops: list[StopSignal] = [anyio.CancelScope()]
    if anyio_backend_name == "trio":
        stops.append(trio.CancelScope())
    for stop in stops:
        assert stop.cancel_called is False
    for scope in stops:
        assert isinstance(scope, (anyio.CancelScope, trio.CancelScope))
        scope.cancel()
        assert scope.cancel_called is True
