"""ToolCallAccumulator: deltas in any fragmentation and interleaving give the same calls."""

from __future__ import annotations

import itertools
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat.chat_completion_chunk import (
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)

from juno_bind_trio import CompletionDefectError, ToolCallAssemblyError
from juno_bind_trio.completion import (
    AssembledToolCall,
    DispatchableToolCall,
    ToolCallAccumulator,
)
from juno_bind_trio.run import ToolCall


def delta(
    index: int | None,
    *,
    id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
    type: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if index is not None:
        out["index"] = index
    if id is not None:
        out["id"] = id
    if type is not None:
        out["type"] = type
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        out["function"] = function
    return out


def sdk(d: dict[str, Any]) -> ChoiceDeltaToolCall:
    function = d.get("function")
    return ChoiceDeltaToolCall(
        index=d["index"],
        id=d.get("id"),
        type=d.get("type"),
        function=None if function is None else ChoiceDeltaToolCallFunction(**function),
    )


def chat(id: str, name: str, arguments: str) -> DispatchableToolCall:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- the ordinary shapes -----------------------------------------------------------


def test_one_call_streamed_openai_style() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(0, id="call_1", type="function", name="search", arguments=""))
    for piece in ['{"q', '": "tr', 'io"}']:
        acc.add(delta(0, arguments=piece))
    assert acc.calls() == [chat("call_1", "search", '{"q": "trio"}')]
    assert len(acc) == 1
    assert acc.delta_count == 4


def test_sdk_delta_objects_assemble_like_dicts() -> None:
    acc = ToolCallAccumulator()
    acc.extend(
        [
            ChoiceDeltaToolCall(
                index=0,
                id="call_1",
                type="function",
                function=ChoiceDeltaToolCallFunction(name="search", arguments='{"q"'),
            )
        ]
    )
    acc.add(ChoiceDeltaToolCall(index=0, function=ChoiceDeltaToolCallFunction(arguments=":1}")))
    acc.add(ChoiceDeltaToolCall(index=1, id="call_2", function=None))
    acc.add(ChoiceDeltaToolCall(index=1, function=ChoiceDeltaToolCallFunction(name="now")))
    assert acc.calls() == [chat("call_1", "search", '{"q":1}'), chat("call_2", "now", "")]


def test_parallel_calls_interleaved_and_out_of_order_come_back_in_index_order() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(1, id="b", name="beta", arguments="{"))
    acc.add(delta(0, id="a", name="alpha", arguments="["))
    acc.add(delta(1, arguments="}"))
    acc.add(delta(0, arguments="]"))
    assert acc.calls() == [chat("a", "alpha", "[]"), chat("b", "beta", "{}")]


def test_indices_that_skip_or_start_late_are_ordered_not_renumbered() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(5, id="x", name="f"))
    acc.add(delta(2, id="y", name="g"))
    assert [c.index for c in acc.assembled()] == [2, 5]
    assert [c["id"] for c in acc.calls()] == ["y", "x"]


def test_assembled_is_readable_mid_stream_and_each_snapshot_is_frozen() -> None:
    acc = ToolCallAccumulator()
    assert acc.assembled() == []
    acc.add(delta(0, arguments='{"a"'))
    first = acc.assembled()
    assert first == [AssembledToolCall(index=0, id=None, name=None, arguments='{"a"')]
    assert not first[0].complete
    acc.add(delta(0, id="c", name="f", arguments=": 1"))
    acc.add(delta(0, arguments="}"))
    second = acc.assembled()
    acc.add(delta(0, arguments=" "))
    # Reading caches the join; later fragments still land after it.
    assert second == [AssembledToolCall(index=0, id="c", name="f", arguments='{"a": 1}')]
    assert second[0].complete
    assert acc.assembled()[0].arguments == '{"a": 1} '
    assert first[0].arguments == '{"a"'


def test_repeated_and_empty_identity_fields_are_tolerated() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(0, id="c", type="function", name="f", arguments="{"))
    acc.add(delta(0, id="c", type="function", name="f", arguments='"k"'))
    acc.add(delta(0, id="", type="", name="", arguments=":2}"))
    assert acc.calls() == [chat("c", "f", '{"k":2}')]


def test_extend_accepts_none_for_a_chunk_without_tool_calls() -> None:
    acc = ToolCallAccumulator()
    acc.extend(None)
    acc.extend([])
    assert acc.calls() == []
    assert acc.delta_count == 0


def test_deltas_without_index_continue_the_last_call_until_a_new_id() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(None, id="a", name="f", arguments="{"))
    acc.add(delta(None, arguments="}"))
    acc.add(delta(None, id="a", arguments=""))
    acc.add(delta(None, id="b", name="g", arguments="{}"))
    acc.add(delta(None, arguments=""))
    assert acc.calls() == [chat("a", "f", "{}"), chat("b", "g", "{}")]


def test_repr_counts() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(0, id="a", name="f"))
    assert repr(acc) == "<ToolCallAccumulator calls=1 deltas=1>"


# -- refusals --------------------------------------------------------------------------


def test_a_second_id_for_an_index_is_refused() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(0, id="call_a", name="f"))
    with pytest.raises(
        ToolCallAssemblyError, match=r"tool call 0 changed id from 'call_a' to 'call_b'"
    ) as info:
        acc.add(delta(0, id="call_b"))
    assert info.value.kind == "inconsistent_tool_call_delta"
    assert info.value.index == 0
    # Routing keys on the base class: this is a defective completion.
    assert isinstance(info.value, CompletionDefectError)


def test_a_changed_name_is_refused() -> None:
    acc = ToolCallAccumulator()
    acc.add(delta(3, id="c", name="search"))
    with pytest.raises(
        ToolCallAssemblyError, match=r"tool call 3 changed name from 'search' to 'fetch'"
    ):
        acc.add(delta(3, name="fetch"))


def test_a_non_function_type_is_refused() -> None:
    with pytest.raises(ToolCallAssemblyError, match=r"has type 'custom'; only 'function'"):
        ToolCallAccumulator().add(delta(0, id="c", type="custom"))


@pytest.mark.parametrize("bad", [-1, True, "0", 1.5])
def test_an_index_that_is_not_a_non_negative_integer_is_refused(bad: object) -> None:
    with pytest.raises(
        ToolCallAssemblyError, match=r"index must be a non-negative integer, got " + repr(bad)
    ) as info:
        ToolCallAccumulator().add({"index": bad, "id": "c"})
    assert info.value.index is None


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"index": 0, "id": 7}, "id"),
        ({"index": 0, "function": {"name": ["f"]}}, "function.name"),
        ({"index": 0, "function": {"arguments": {"q": 1}}}, "function.arguments"),
    ],
)
def test_fields_of_the_wrong_type_are_refused(bad: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolCallAssemblyError, match=rf"tool call 0: {field} must be a string"):
        ToolCallAccumulator().add(bad)


@pytest.mark.parametrize("bad", [None, 42, "index"])
def test_a_value_that_is_not_a_delta_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match=r"ToolCallAccumulator\.add: expected a tool-call delta"):
        ToolCallAccumulator().add(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("deltas", "message"),
    [
        ([delta(0, name="f", arguments="{}")], r"tool call 0 ended without an id"),
        ([delta(0, id="c"), delta(1, id="d", name="g")], r"tool call 0 ended without a name"),
    ],
)
def test_calls_refuses_a_call_missing_its_id_or_name(
    deltas: list[dict[str, Any]], message: str
) -> None:
    acc = ToolCallAccumulator()
    acc.extend(deltas)
    with pytest.raises(ToolCallAssemblyError, match=message) as info:
        acc.calls()
    assert info.value.kind == "incomplete_tool_call"
    assert info.value.index == 0


# -- a provider's own fields -------------------------------------------------------------

SIGNATURE = {"google": {"thought_signature": "c2lnbmF0dXJl"}}


def test_a_providers_field_on_a_call_is_kept_for_the_next_request() -> None:
    # Gemini's OpenAI-compatible stream: the signature rides on the call's first delta,
    # and the next request is refused without it.
    acc = ToolCallAccumulator()
    acc.add(
        {**delta(0, id="c1", type="function", name="f", arguments=""), "extra_content": SIGNATURE}
    )
    acc.add(delta(0, arguments='{"a": 1}'))
    acc.add({**delta(1, id="c2", name="g", arguments="{}")})
    (first, second) = acc.tool_calls()
    assert isinstance(first, ToolCall)
    assert dict(first.extra) == {"extra_content": SIGNATURE}
    assert dict(second.extra) == {}
    assert acc.calls() == [
        {**chat("c1", "f", '{"a": 1}'), "extra_content": SIGNATURE},
        chat("c2", "g", "{}"),
    ]


def test_the_sdks_delta_objects_keep_their_extra_fields_too() -> None:
    acc = ToolCallAccumulator()
    acc.add(
        ChoiceDeltaToolCall.model_validate(
            {
                "index": 0,
                "id": "c1",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
                "extra_content": SIGNATURE,
            }
        )
    )
    (call,) = acc.tool_calls()
    assert dict(call.extra) == {"extra_content": SIGNATURE}
    assert call.to_wire()["extra_content"] == SIGNATURE


def test_a_providers_fields_fold_as_a_stream_sends_them() -> None:
    acc = ToolCallAccumulator()
    acc.add({**delta(0, id="c1", name="f"), "note": "ab", "parts": [1], "sig": {"v": 1}})
    acc.add({**delta(0, arguments="{}"), "note": "cd", "parts": [2], "sig": {"v": 2}, "x": None})
    acc.add({**delta(0), "sig": {"v": 2}})
    (call,) = acc.tool_calls()
    # Strings and lists continue; any other value is replaced; None is absence.
    assert dict(call.extra) == {"note": "abcd", "parts": [1, 2], "sig": {"v": 2}}


def test_a_providers_field_must_have_a_string_name() -> None:
    acc = ToolCallAccumulator()
    bad: dict[Any, Any] = {**delta(0, id="c1", name="f"), 3: "x"}
    with pytest.raises(ToolCallAssemblyError, match=r"a field's name must be a string"):
        acc.add(bad)


def test_tool_calls_are_built_once_each_and_refuse_an_incomplete_call() -> None:
    acc = ToolCallAccumulator()
    acc.extend([delta(0, id="c1", name="f", arguments='{"a":'), delta(0, arguments="1}")])
    (call,) = acc.tool_calls()
    assert (call.id, call.name, call.arguments, call.parsed) == ("c1", "f", '{"a":1}', {"a": 1})
    acc.add(delta(1, id="c2"))
    with pytest.raises(ToolCallAssemblyError, match=r"tool call 1 ended without a name"):
        acc.tool_calls()


def test_assembly_error_survives_pickling() -> None:
    error = ToolCallAssemblyError("incomplete_tool_call", "tool call 2 ended without a name", 2)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.kind, copy.detail, copy.index) == (
        ToolCallAssemblyError,
        "incomplete_tool_call",
        "tool call 2 ended without a name",
        2,
    )


# -- any fragmentation, any interleaving ------------------------------------------------


@st.composite
def streamed_calls(draw: st.DrawFn) -> tuple[list[DispatchableToolCall], list[dict[str, Any]]]:
    """A set of calls, and one way a server might stream them."""
    count = draw(st.integers(min_value=0, max_value=4))
    indices = sorted(draw(st.lists(st.integers(0, 9), min_size=count, max_size=count, unique=True)))
    names = st.text(st.sampled_from("abcdefgh_"), min_size=1, max_size=8)
    per_call: list[list[dict[str, Any]]] = []
    expected: list[DispatchableToolCall] = []
    for position, index in enumerate(indices):
        call_id = f"call_{position}_{draw(st.integers(0, 99))}"
        name = draw(names)
        arguments = draw(st.text(max_size=30))
        # Cut the arguments into fragments (empty ones included).
        cuts = sorted(draw(st.lists(st.integers(0, len(arguments)), max_size=6)))
        bounds = [0, *cuts, len(arguments)]
        pieces = [arguments[a:b] for a, b in itertools.pairwise(bounds)]
        deltas = [delta(index, arguments=piece) for piece in pieces]
        # The id and the name arrive once, usually first, sometimes later.
        id_at = draw(st.sampled_from([0, 0, 0, draw(st.integers(0, len(deltas) - 1))]))
        name_at = draw(st.sampled_from([0, 0, 0, draw(st.integers(0, len(deltas) - 1))]))
        deltas[id_at]["id"] = call_id
        deltas[id_at]["type"] = "function"
        deltas[name_at].setdefault("function", {})["name"] = name
        # Some servers repeat them, or send empty strings, on later deltas.
        style = draw(st.sampled_from(["once", "repeat", "empty"]))
        for later in deltas[max(id_at, name_at) + 1 :]:
            if style == "repeat":
                later["id"] = call_id
                later.setdefault("function", {})["name"] = name
            elif style == "empty":
                later["id"] = ""
                later.setdefault("function", {})["name"] = ""
        per_call.append(deltas)
        expected.append(chat(call_id, name, arguments))
    # Interleave: any merge of the per-call sequences that keeps each one's order.
    queues = [list(d) for d in per_call]
    stream: list[dict[str, Any]] = []
    while any(queues):
        live = [q for q in queues if q]
        stream.append(draw(st.sampled_from(live)).pop(0))
    return expected, stream


@settings(max_examples=200, deadline=None)
@given(case=streamed_calls(), as_objects=st.lists(st.booleans(), max_size=40), data=st.data())
def test_any_fragmentation_and_interleaving_assembles_to_the_same_calls(
    case: tuple[list[DispatchableToolCall], list[dict[str, Any]]],
    as_objects: list[bool],
    data: st.DataObject,
) -> None:
    expected, stream = case
    final = {call["function"]["name"] + call["id"]: call for call in expected}
    acc = ToolCallAccumulator()
    seen_ids: dict[int, str] = {}
    for i, d in enumerate(stream):
        # Mix the wire dicts with the SDK's objects, delta by delta.
        acc.add(sdk(d) if i < len(as_objects) and as_objects[i] else d)
        if data.draw(st.booleans(), label="read mid-stream"):
            for call in acc.assembled():
                # Mid-stream reads only ever grow: an id, once known, stays.
                if call.id is not None:
                    assert seen_ids.setdefault(call.index, call.id) == call.id
                    done = next(c for c in final.values() if c["id"] == call.id)
                    assert done["function"]["arguments"].startswith(call.arguments)
    assert acc.calls() == expected
    assert acc.delta_count == len(stream)
