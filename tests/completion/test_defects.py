"""detect_completion_defect, expects_json_output, json_parses, structured_output_parses."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)

from juno_bind_trio import CompletionDefectError
from juno_bind_trio.completion import (
    DEFAULT_COMPLETION_DEFECT_MAX_RETRIES,
    DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES,
    AssembledCompletion,
    AssembledToolCall,
    CompletionDefect,
    ToolCallAccumulator,
    detect_completion_defect,
    expects_json_output,
    json_parses,
    structured_output_parses,
)


def call(
    id: str | None = "c1", name: str | None = "search", arguments: str = '{"q": 1}'
) -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def kind_of(**fields: Any) -> str | None:
    defect = detect_completion_defect(AssembledCompletion(**fields))
    return None if defect is None else defect.kind


def test_retry_defaults() -> None:
    assert DEFAULT_COMPLETION_DEFECT_MAX_RETRIES == 2
    assert DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES == 2


# -- usable completions --------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"content": "Hello", "finish_reason": "stop"},
        {"content": None, "tool_calls": [call()], "finish_reason": "tool_calls"},
        {"content": "Let me look.", "tool_calls": [call()], "finish_reason": "tool_calls"},
        # Some servers say "stop" for a tool-calling turn.
        {"tool_calls": [call()], "finish_reason": "stop"},
        # A provider's own finish reason is not a defect.
        {"content": "ok", "finish_reason": "end_turn"},
        # A refusal is an answer.
        {"content": None, "refusal": "I can't help with that.", "finish_reason": "stop"},
        # No-argument calls in every shape servers send them.
        {
            "tool_calls": [call(arguments=""), call(id="c2", arguments="null")],
            "finish_reason": "stop",
        },
    ],
)
def test_usable_completions_have_no_defect(fields: dict[str, Any]) -> None:
    assert detect_completion_defect(AssembledCompletion(**fields)) is None


# -- each defect ------------------------------------------------------------------------


def test_a_stream_that_ended_without_finish_reason_is_cut_off() -> None:
    # The openai SDK raises nothing when a body ends cleanly without [DONE].
    defect = detect_completion_defect(
        AssembledCompletion(content="Half an answ", finish_reason=None)
    )
    assert defect == CompletionDefect(
        "no_finish_reason",
        "the stream ended without a finish reason: it was cut off before the end",
    )


def test_content_filter() -> None:
    assert kind_of(content="", finish_reason="content_filter") == "content_filtered"


def test_cut_off_by_length() -> None:
    assert kind_of(content="A long essay that", finish_reason="length") == "truncated"


@pytest.mark.parametrize("content", [None, "", "  \n "])
def test_no_content_and_no_tool_calls_is_empty(content: str | None) -> None:
    defect = detect_completion_defect(AssembledCompletion(content=content, finish_reason="stop"))
    assert defect is not None
    assert defect.kind == "empty"
    assert "no tool calls (finish reason 'stop')" in defect.detail


@pytest.mark.parametrize(
    ("tool_call", "detail"),
    [
        (call(id=None), "tool call 1 has no id"),
        (call(id=""), "tool call 1 has no id"),
        (call(name=None), "tool call 1 has no name"),
        (AssembledToolCall(index=4, id="c9", name=None, arguments="{}"), "tool call 1 has no name"),
    ],
)
def test_a_tool_call_without_id_or_name_is_incomplete(tool_call: Any, detail: str) -> None:
    defect = detect_completion_defect(
        AssembledCompletion(tool_calls=[call(id="c0"), tool_call], finish_reason="tool_calls")
    )
    assert defect is not None
    assert defect.kind == "incomplete_tool_call"
    assert defect.detail.startswith(detail)


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        ('{"q": ', "not valid JSON"),
        ("[1]", "must be a JSON object, got an array"),
        ('{"x": NaN}', "not valid JSON"),
    ],
)
def test_tool_call_arguments_that_do_not_parse(arguments: str, detail: str) -> None:
    defect = detect_completion_defect(
        AssembledCompletion(tool_calls=[call(arguments=arguments)], finish_reason="tool_calls")
    )
    assert defect is not None
    assert defect.kind == "unparseable_tool_arguments"
    assert defect.detail.startswith("tool call 0 (search): tool-call arguments")
    assert detail in defect.detail


def test_non_string_arguments_are_unparseable() -> None:
    bad = {"id": "c", "function": {"name": "f", "arguments": {"q": 1}}}
    assert kind_of(tool_calls=[bad], finish_reason="stop") == "unparseable_tool_arguments"


def test_sdk_message_tool_calls_are_read_by_attribute() -> None:
    good = ChatCompletionMessageFunctionToolCall(
        id="c1", type="function", function=Function(name="f", arguments="{}")
    )
    bad = ChatCompletionMessageFunctionToolCall(
        id="c2", type="function", function=Function(name="g", arguments="{")
    )
    assert kind_of(tool_calls=[good], finish_reason="stop") is None
    assert kind_of(tool_calls=[good, bad], finish_reason="stop") == "unparseable_tool_arguments"


def test_the_accumulators_output_feeds_the_check() -> None:
    acc = ToolCallAccumulator()
    acc.add({"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}})
    partial = AssembledCompletion(tool_calls=acc.assembled(), finish_reason="tool_calls")
    assert detect_completion_defect(partial) == CompletionDefect(
        "unparseable_tool_arguments",
        "tool call 0 (f): tool-call arguments are not valid JSON "
        "(Expecting ':' delimiter: line 1 column 5 (char 4)): '{\"a\"'",
    )
    acc.add({"index": 0, "function": {"arguments": ": 1}"}})
    done = AssembledCompletion(tool_calls=acc.calls(), finish_reason="tool_calls")
    assert detect_completion_defect(done) is None


# -- root cause first ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        # Cut off mid tool call: the cut is the cause, not the broken arguments.
        ({"tool_calls": [call(arguments='{"q')], "finish_reason": None}, "no_finish_reason"),
        ({"content": None, "finish_reason": None}, "no_finish_reason"),
        ({"content": None, "finish_reason": "content_filter"}, "content_filtered"),
        ({"tool_calls": [call(arguments='{"q')], "finish_reason": "length"}, "truncated"),
        ({"content": "", "finish_reason": "length"}, "truncated"),
        (
            {"tool_calls": [call(name=None, arguments="{")], "finish_reason": "stop"},
            "incomplete_tool_call",
        ),
    ],
)
def test_the_root_cause_is_reported_when_several_apply(fields: dict[str, Any], kind: str) -> None:
    assert kind_of(**fields) == kind


def test_defect_as_error_is_what_routing_keys_on() -> None:
    error = CompletionDefect("truncated", "cut off").as_error()
    assert type(error) is CompletionDefectError
    assert (error.kind, error.detail) == ("truncated", "cut off")
    assert str(error) == "completion defect (truncated): cut off"


# -- validation ------------------------------------------------------------------------------


def test_finish_reason_is_required() -> None:
    with pytest.raises(TypeError, match="finish_reason"):
        AssembledCompletion(content="x")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"content": 1, "finish_reason": "stop"},
            r"AssembledCompletion: content must be a str or None, got 1",
        ),
        ({"finish_reason": 0}, r"AssembledCompletion: finish_reason must be a str or None, got 0"),
        (
            {"refusal": b"no", "finish_reason": "stop"},
            r"AssembledCompletion: refusal must be a str",
        ),
        (
            {"tool_calls": call(), "finish_reason": "stop"},
            r"tool_calls must be a sequence of tool calls",
        ),
        (
            {"tool_calls": "abc", "finish_reason": "stop"},
            r"tool_calls must be a sequence of tool calls",
        ),
    ],
)
def test_assembled_completion_validates_its_fields(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        AssembledCompletion(**fields)


def test_detect_refuses_anything_but_an_assembled_completion() -> None:
    with pytest.raises(
        TypeError, match=r"detect_completion_defect: expected an AssembledCompletion"
    ):
        detect_completion_defect({"content": "x", "finish_reason": "stop"})  # type: ignore[arg-type]


def test_tool_calls_none_means_none_and_lists_are_frozen_to_tuples() -> None:
    completion = AssembledCompletion(content="x", tool_calls=None, finish_reason="stop")
    assert completion.tool_calls == ()
    calls = [call()]
    frozen = AssembledCompletion(tool_calls=calls, finish_reason="stop")
    calls.clear()
    assert len(frozen.tool_calls) == 1


# -- response formats ----------------------------------------------------------------------


class Answer:
    """Stands in for a pydantic model class handed to the SDK's parse()."""


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        (None, False),
        ({"type": "text"}, False),
        ({"type": "json_object"}, True),
        ({"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}, True),
        ({"type": "grammar", "grammar": "root ::= 'x'"}, False),
        (Answer, True),
    ],
)
def test_expects_json_output(response_format: Any, expected: bool) -> None:
    assert expects_json_output(response_format) is expected


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("json_object", r"expects_json_output: response_format must be a mapping, a class or None"),
        ({"json_schema": {}}, r"expects_json_output: response_format must have a string 'type'"),
        ({"type": None}, r"must have a string 'type', got \{'type': None\}"),
    ],
)
def test_expects_json_output_rejects_malformed_formats(bad: Any, message: str) -> None:
    # Not a mapping is the wrong type; a mapping without its 'type' is a wrong value.
    with pytest.raises(TypeError if isinstance(bad, str) else ValueError, match=message):
        expects_json_output(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', True),
        (" [1, 2] \n", True),
        ('"just a string"', True),
        ("0", True),
        ("null", True),
        (None, False),
        ("", False),
        ("   ", False),
        ("{'a': 1}", False),
        ("NaN", False),
        ('{"a": Infinity}', False),
        ('```json\n{"a": 1}\n```', False),
        ('{"a": 1} trailing', False),
    ],
)
def test_json_parses(text: str | None, expected: bool) -> None:
    assert json_parses(text) is expected


def test_json_parses_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match=r"json_parses: text must be a str or None, got b'{}'"):
        json_parses(b"{}")  # type: ignore[arg-type]


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_anything_json_dumps_produces_parses(value: object) -> None:
    assert json_parses(json.dumps(value))


@attrs.frozen
class Outputs:
    content: str | None
    tool_calls: tuple[Any, ...] = ()
    refusal: str | None = None


def schema(root: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": root}}


@pytest.mark.parametrize(
    ("outputs", "response_format", "expected"),
    [
        # Not asking for JSON: anything goes.
        (Outputs("plain prose"), None, True),
        (Outputs(None), {"type": "text"}, True),
        # json_object: an object, nothing else.
        (Outputs('{"a": 1}'), {"type": "json_object"}, True),
        (Outputs(' {"a": 1}\n'), {"type": "json_object"}, True),
        (Outputs("[1]"), {"type": "json_object"}, False),
        (Outputs('{"a": 1'), {"type": "json_object"}, False),
        (Outputs('```json\n{"a": 1}\n```'), {"type": "json_object"}, False),
        (Outputs(None), {"type": "json_object"}, False),
        (Outputs(""), {"type": "json_object"}, False),
        # A model class asks for an object too.
        (Outputs('{"a": 1}'), Answer, True),
        (Outputs('"a"'), Answer, False),
        # json_schema: the root type the schema declares, or anything.
        (Outputs('{"a": 1}'), schema({"type": "object"}), True),
        (Outputs("[1]"), schema({"type": "object"}), False),
        (Outputs("[1]"), schema({"type": "array"}), True),
        (Outputs("3"), schema({"type": "integer"}), True),
        (Outputs("3.0"), schema({"type": "integer"}), True),
        (Outputs("3.5"), schema({"type": "integer"}), False),
        (Outputs("true"), schema({"type": "number"}), False),
        (Outputs("null"), schema({"type": ["string", "null"]}), True),
        (Outputs("7"), schema({"type": ["string", "null"]}), False),
        (Outputs("[1]"), schema({"anyOf": [{"type": "array"}]}), True),
        (Outputs("[1]"), {"type": "json_schema"}, True),
        (Outputs("NaN"), schema({}), False),
        # Tool calls and refusals are not the final answer: nothing to re-ask.
        (Outputs(None, tool_calls=(object(),)), {"type": "json_object"}, True),
        (Outputs(None, refusal="I can't."), {"type": "json_object"}, True),
    ],
)
def test_structured_output_parses(outputs: Outputs, response_format: Any, expected: bool) -> None:
    assert structured_output_parses(outputs, response_format) is expected


def test_structured_output_parses_reads_an_assembled_completion() -> None:
    completion = AssembledCompletion(content='{"ok": true}', finish_reason="stop")
    assert structured_output_parses(completion, {"type": "json_object"})


def test_structured_output_parses_rejects_non_string_content() -> None:
    with pytest.raises(
        TypeError, match=r"structured_output_parses: outputs\.content must be a str"
    ):
        structured_output_parses(Outputs(content=5), {"type": "json_object"})  # type: ignore[arg-type]
