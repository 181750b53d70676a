"""parse_tool_call_arguments / tool_call_arguments_absent: one defined answer per shape."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio import CompletionDefectError, ToolCallArgumentsError
from juno_bind_trio.completion import parse_tool_call_arguments, tool_call_arguments_absent


@pytest.mark.parametrize("raw", [None, "", "   ", "\n\t", "null", "  null \n"])
def test_absent_arguments_parse_to_an_empty_object(raw: str | None) -> None:
    assert parse_tool_call_arguments(raw) == {}
    assert tool_call_arguments_absent(raw)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("{}", {}),
        (' {"q": "trio", "n": 2} ', {"q": "trio", "n": 2}),
        ('{"nested": {"a": [1, null, true]}}', {"nested": {"a": [1, None, True]}}),
        ('{"k": 1, "k": 2}', {"k": 2}),
    ],
)
def test_objects_parse_and_are_not_absent(raw: str, parsed: dict[str, Any]) -> None:
    assert parse_tool_call_arguments(raw) == parsed
    assert not tool_call_arguments_absent(raw)


def test_each_parse_returns_a_fresh_dict() -> None:
    first = parse_tool_call_arguments(None)
    first["mutated"] = True
    assert parse_tool_call_arguments(None) == {}


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        ("[1, 2]", "an array"),
        ('"{\\"q\\": 1}"', "a JSON string"),
        ("42", "a JSON number"),
        ("1.5", "a JSON number"),
        ("true", "a JSON boolean"),
    ],
)
def test_json_that_is_not_an_object_is_refused(raw: str, what: str) -> None:
    with pytest.raises(ToolCallArgumentsError, match=rf"must be a JSON object, got {what}") as info:
        parse_tool_call_arguments(raw)
    assert info.value.kind == "unparseable_tool_arguments"
    assert info.value.arguments == raw
    assert isinstance(info.value, CompletionDefectError)
    assert not tool_call_arguments_absent(raw)


@pytest.mark.parametrize(
    "raw",
    [
        '{"q": ',  # cut off mid-stream
        "{'q': 1}",  # Python, not JSON
        '{"q": 1} {"r": 2}',  # two documents
        '{"x": NaN}',
        '{"x": Infinity}',
        '{"x": -Infinity}',
        "__import__('os').system('true')",  # never evaluated
        "1" * 5000,  # past Python's integer digit limit
        "[" * 100_000,  # deep enough to exhaust the recursion limit
    ],
)
def test_malformed_json_is_refused(raw: str) -> None:
    with pytest.raises(ToolCallArgumentsError, match=r"tool-call arguments are not valid JSON"):
        parse_tool_call_arguments(raw)


def test_long_arguments_are_shortened_in_the_message_but_kept_whole() -> None:
    raw = '{"text": "' + "x" * 1000
    with pytest.raises(ToolCallArgumentsError, match=r"\.\.\. \(1010 characters\)") as info:
        parse_tool_call_arguments(raw)
    assert info.value.arguments == raw
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("bad", [b"{}", 1, {"q": 1}])
def test_non_strings_are_a_type_error_naming_the_function(bad: object) -> None:
    with pytest.raises(TypeError, match=r"parse_tool_call_arguments: arguments must be a str"):
        parse_tool_call_arguments(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tool_call_arguments_absent: arguments must be a str"):
        tool_call_arguments_absent(bad)  # type: ignore[arg-type]


def test_arguments_error_survives_pickling() -> None:
    error = ToolCallArgumentsError("not JSON", "{oops")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.kind, copy.detail, copy.arguments) == (
        ToolCallArgumentsError,
        "unparseable_tool_arguments",
        "not JSON",
        "{oops",
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.booleans())
def test_any_json_object_round_trips(value: dict[str, Any], indent: bool) -> None:
    raw = json.dumps(value, indent=2 if indent else None)
    assert parse_tool_call_arguments(raw) == value
    assert not tool_call_arguments_absent(raw)


@given(json_values.filter(lambda v: not isinstance(v, dict) and v is not None))
def test_any_other_json_value_is_refused(value: object) -> None:
    with pytest.raises(ToolCallArgumentsError, match=r"must be a JSON object"):
        parse_tool_call_arguments(json.dumps(value))


@given(st.text(max_size=40))
def test_any_text_either_parses_to_a_dict_or_raises_the_defect(raw: str) -> None:
    try:
        parsed = parse_tool_call_arguments(raw)
    except ToolCallArgumentsError as exc:
        assert exc.arguments == raw  # noqa: PT017 - the property is about the error's payload
    else:
        assert isinstance(parsed, dict)
