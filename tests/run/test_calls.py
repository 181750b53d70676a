"""Reading a tool call in either shape, and refusing a malformed one by name."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import outcome
import pytest
import trio
from openai.types.chat import ChatCompletionMessageCustomToolCall, ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_message_custom_tool_call import Custom
from openai.types.chat.chat_completion_message_function_tool_call import Function

from juno_bind_trio import AbortedToolCallError
from juno_bind_trio.run import (
    StopSignal,
    ToolCallLike,
    run_tool_calls_pooled_by_tool,
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
async def test_a_cancel_scope_of_either_library_serves_as_the_stop(anyio_backend_name: str) -> None:
    # Read-only use is the whole contract: an unentered scope of either
    # library is handed to the pool and cancelled later, and the pool reads it.
    stops: list[StopSignal] = [anyio.CancelScope()]
    if anyio_backend_name == "trio":
        stops.append(trio.CancelScope())
    for stop in stops:

        async def tool(call: ToolCallLike, stop: Any = stop) -> str:
            stop.cancel()  # pressed while the first call is in flight
            await anyio.lowlevel.checkpoint()
            return tool_call_id(call)

        results = await run_tool_calls_pooled_by_tool(
            [as_dict("c1"), as_dict("c2")], tool, stop=stop, per_tool_limit=1
        )
        assert results[0] == outcome.Value("c1")
        refused = results[1]
        assert isinstance(refused, outcome.Error)
        assert isinstance(refused.error, AbortedToolCallError)
        assert refused.error.tool_call_id == "c2"
