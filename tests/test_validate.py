"""The argument rules: one message, TypeError for the wrong type, ValueError for a wrong value."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs
import hypothesis.strategies as st
import pytest
from hypothesis import given

from juno_bind_trio._validate import (
    Rule,
    a_bool,
    a_callable,
    a_mapping,
    a_number,
    a_str,
    any_of,
    async_callable,
    count,
    having,
    instance_of,
    matching,
    non_empty_str,
    one_of,
    optional,
    positive_seconds,
    sequence_of,
)

HUGE = 10**400


class _Index:
    """An integer that is not an int (a numpy integer, say)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


async def _async_fn() -> None:
    return None


def _sync_fn() -> None:
    return None


class _AsyncCall:
    async def __call__(self) -> None:
        return None


def _refusal(rule: Rule[Any], value: object) -> type[Exception] | None:
    """The exception *rule* refuses *value* with (its message checked), or None."""
    refused: TypeError | ValueError | None = None
    try:
        rule.check("f: x", value)
    except (TypeError, ValueError) as exc:
        refused = exc
    if refused is None:
        return None
    assert str(refused).startswith(f"f: x must be {rule.expects}, got "), str(refused)
    return type(refused)


# --- the message -------------------------------------------------------------------


def test_a_refusal_names_where_what_was_wanted_and_what_came() -> None:
    with pytest.raises(ValueError) as info:
        count().check("TurnTextStream: max_resets", -1)
    assert str(info.value) == "TurnTextStream: max_resets must be a non-negative integer, got -1"
    with pytest.raises(TypeError) as type_info:
        count().check("TurnTextStream: max_resets", 1.5)
    assert str(type_info.value) == (
        "TurnTextStream: max_resets must be a non-negative integer, got 1.5"
    )


def test_a_refusal_shows_a_huge_value_shortened_and_hides_where_it_was_raised() -> None:
    with pytest.raises(TypeError) as info:
        a_bool().check("f: flag", "x" * 10_000)
    assert len(str(info.value)) < 150
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_a_rule_is_an_attrs_validator_naming_the_class_and_the_argument() -> None:
    @attrs.frozen
    class Sample:
        _flag: bool = attrs.field(validator=a_bool(), alias="flag")
        limit: int | None = attrs.field(default=None, validator=optional(count(minimum=1)))

    assert Sample(flag=True).limit is None
    with pytest.raises(TypeError, match=r"^Sample: flag must be a bool, got 1$"):
        Sample(flag=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^Sample: limit must be a positive integer or None"):
        Sample(flag=False, limit=0)


# --- counts ------------------------------------------------------------------------


@given(st.integers(), st.integers(0, 3))
def test_a_count_takes_every_integer_from_its_minimum_and_refuses_the_rest_as_a_value(
    number: int, minimum: int
) -> None:
    rule = count(minimum=minimum)
    if number >= minimum:
        assert rule.check("f: n", number) == number
        assert rule.check("f: n", _Index(number)) == number
    else:
        assert _refusal(rule, number) is ValueError
        assert _refusal(rule, _Index(number)) is ValueError


@pytest.mark.parametrize("value", [True, False, 1.0, 1.5, math.nan, math.inf, "3", None, b"1", [1]])
def test_a_count_refuses_bools_floats_and_non_numbers_as_the_wrong_type(value: object) -> None:
    assert _refusal(count(), value) is TypeError


def test_a_count_says_what_its_minimum_means() -> None:
    assert count().expects == "a non-negative integer"
    assert count(minimum=1).expects == "a positive integer"
    assert count(minimum=3).expects == "an integer of at least 3"


# --- numbers and seconds -----------------------------------------------------------


@pytest.mark.parametrize(
    ("zero", "infinite", "value", "outcome"),
    [
        (False, False, 1, 1.0),
        (False, False, 0.25, 0.25),
        (False, False, 0, ValueError),
        (True, False, 0, 0.0),
        (False, False, -1, ValueError),
        (True, True, -0.5, ValueError),
        (False, False, math.inf, ValueError),
        (False, True, math.inf, math.inf),
        (False, True, HUGE, math.inf),
        (False, False, HUGE, ValueError),
        (True, True, -HUGE, ValueError),
        (True, True, math.nan, ValueError),
        (True, True, True, TypeError),
        (True, True, "1", TypeError),
        (True, True, None, TypeError),
        (True, True, _Index(3), TypeError),
    ],
)
def test_positive_seconds(zero: bool, infinite: bool, value: object, outcome: object) -> None:
    rule = positive_seconds(zero=zero, infinite=infinite)
    if isinstance(outcome, type):
        assert _refusal(rule, value) is outcome
    else:
        result = rule.check("f: seconds", value)
        assert result == outcome
        assert type(result) is float


def test_seconds_say_in_words_what_they_take() -> None:
    assert positive_seconds().expects == "a positive finite number of seconds"
    assert positive_seconds(zero=True).expects == "a non-negative finite number of seconds"
    assert positive_seconds(infinite=True).expects == "a positive number of seconds"
    assert positive_seconds(zero=True, infinite=True).expects == "a non-negative number of seconds"


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_every_float_is_the_right_type_for_seconds(value: float) -> None:
    assert _refusal(positive_seconds(zero=True, infinite=True), value) in (None, ValueError)
    assert _refusal(a_number(), value) in (None, ValueError)


def test_a_number_with_a_minimum() -> None:
    rule = a_number(minimum=1)
    assert rule.check("f: factor", 2) == 2.0
    assert _refusal(rule, 0.5) is ValueError
    assert _refusal(rule, math.inf) is ValueError
    assert a_number(minimum=1, finite=False).check("f: factor", math.inf) == math.inf
    assert _refusal(rule, "2") is TypeError
    assert rule.expects == "a finite number of at least 1"


# --- bools, strings, choices -------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, None, "true", 1.0])
def test_a_bool_is_a_bool(value: object) -> None:
    assert _refusal(a_bool(), value) is TypeError
    assert a_bool().check("f: flag", True) is True


def test_strings() -> None:
    assert a_str().check("f: s", "") == ""
    assert _refusal(a_str(), b"x") is TypeError
    assert non_empty_str().check("f: s", " ") == " "
    assert _refusal(non_empty_str(), "") is ValueError
    assert _refusal(non_empty_str(), None) is TypeError
    assert _refusal(non_empty_str(blank=False), " \t") is ValueError
    assert non_empty_str(blank=False).check("f: s", " a ") == " a "


def test_matching() -> None:
    rule = matching(r"[a-z]{1,3}", "1 to 3 small letters")
    assert rule.check("f: name", "abc") == "abc"
    assert _refusal(rule, "abcd") is ValueError
    assert _refusal(rule, 3) is TypeError
    assert rule.expects == "1 to 3 small letters"


def test_one_of_refuses_another_member_of_the_type_as_a_value_and_another_type_as_a_type() -> None:
    rule = one_of("trio", "asyncio")
    assert rule.check("f: backend", "trio") == "trio"
    assert _refusal(rule, "curio") is ValueError
    assert _refusal(rule, 3) is TypeError
    assert _refusal(rule, ["trio"]) is TypeError  # unhashable: never Python's own complaint
    assert rule.expects == "one of 'trio', 'asyncio'"
    with pytest.raises(ValueError, match="one_of"):
        one_of()


# --- objects -----------------------------------------------------------------------


def test_instance_of() -> None:
    assert instance_of(int).check("f: n", 3) == 3
    assert _refusal(instance_of(int), "3") is TypeError
    assert instance_of(int).expects == "an int"
    assert instance_of(int, str).expects == "an int or a str"
    assert instance_of(int, expects="a whole number").expects == "a whole number"


def test_a_mapping_and_a_callable() -> None:
    assert a_mapping().check("f: m", {}) == {}
    assert _refusal(a_mapping(), [("a", 1)]) is TypeError
    assert a_callable().check("f: fn", len) is len
    assert _refusal(a_callable(), 3) is TypeError


@pytest.mark.parametrize(
    "value",
    [
        _async_fn,
        functools.partial(_async_fn),
        functools.partial(functools.partial(_async_fn)),
        _AsyncCall(),
        functools.partial(_AsyncCall()),
    ],
)
def test_an_async_callable_unwraps_partials(value: Callable[..., Any]) -> None:
    assert async_callable().check("f: port", value) is value


@pytest.mark.parametrize("value", [_sync_fn, functools.partial(_sync_fn), None, 3, _async_fn()])
def test_anything_else_is_not_an_async_callable(value: object) -> None:
    try:
        assert _refusal(async_callable(), value) is TypeError
    finally:
        if hasattr(value, "close"):
            value.close()  # the coroutine object made for the test


def test_having_reads_one_attribute_of_a_duck() -> None:
    class Scope:
        cancel_called = False

    class Odd:
        cancel_called = "no"

    rule = having("cancel_called", a_bool(), expects="a CancelScope")
    scope = Scope()
    assert rule.check("f: stop", scope) is scope
    assert _refusal(rule, Odd()) is TypeError
    assert _refusal(rule, object()) is TypeError


# --- composition -------------------------------------------------------------------


def test_optional_adds_none() -> None:
    rule = optional(positive_seconds())
    assert rule.check("f: s", None) is None
    assert rule.check("f: s", 2) == 2.0
    assert _refusal(rule, -2) is ValueError
    assert _refusal(rule, "2") is TypeError
    assert rule.expects == "a positive finite number of seconds or None"


def test_sequence_of() -> None:
    rule = sequence_of(count(), non_empty=True)
    assert rule.check("f: ns", [1, 2]) == (1, 2)
    assert rule.check("f: ns", iter([3])) == (3,)
    assert _refusal(rule, []) is ValueError
    assert _refusal(rule, [1, -1]) is ValueError
    assert _refusal(rule, [1, "2"]) is TypeError
    for not_a_list in ("12", b"12", {1: 2}, 3):
        assert _refusal(rule, not_a_list) is TypeError
    assert rule.expects == "a non-empty sequence, each item a non-negative integer"


def test_any_of_takes_the_first_that_accepts_and_prefers_a_value_refusal() -> None:
    rule = any_of(one_of("auto"), positive_seconds())
    assert rule.check("f: t", "auto") == "auto"
    assert rule.check("f: t", 3) == 3.0
    assert _refusal(rule, "never") is ValueError
    assert _refusal(rule, -3) is ValueError
    assert _refusal(rule, None) is TypeError
    assert rule.expects == "one of 'auto' or a positive finite number of seconds"


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
_RULES: list[Rule[Any]] = [
    count(),
    count(minimum=1),
    positive_seconds(),
    positive_seconds(zero=True, infinite=True),
    a_number(minimum=0),
    a_bool(),
    a_str(),
    non_empty_str(),
    one_of("a", "b"),
    instance_of(int),
    a_mapping(),
    a_callable(),
    async_callable(),
    optional(count()),
    sequence_of(non_empty_str()),
    any_of(a_bool(), count()),
]


@given(st.sampled_from(_RULES), _VALUES)
def test_every_rule_returns_or_refuses_in_the_one_shape(rule: Rule[Any], value: object) -> None:
    _refusal(rule, value)  # asserts the message; any other exception fails the test


_TOOL_NAME_ALPHABET = st.sampled_from(
    "abcxyzABCXYZ0189_-" + " .:/\n\t\x00é"  # the rule's own characters, and some it refuses
)


@given(st.text(_TOOL_NAME_ALPHABET, max_size=70))
def test_one_tool_name_rule_for_every_place_that_names_a_tool(name: str) -> None:
    """ToolDef, @tool, Tool.from_schema, ToolOutput and MCP's names keep one rule."""
    from juno_bind_trio._validate import is_tool_name
    from juno_bind_trio.agent import Tool, ToolOutput, tool
    from juno_bind_trio.plugins import ToolDef

    wanted = 1 <= len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    assert is_tool_name(name) is wanted

    async def handler(ctx: object, arguments: dict[str, Any]) -> object:
        return None

    async def fn() -> None:
        return None

    makers: list[Callable[[], object]] = [
        lambda: ToolDef(name=name, description="d", parameters={"type": "object"}, handler=handler),
        lambda: tool(fn, name=name),
        lambda: Tool.from_schema(
            name=name, description=None, parameters={"type": "object"}, handler=handler
        ),
        lambda: ToolOutput(int, name=name),
    ]
    for make in makers:
        if wanted:
            make()
        else:
            with pytest.raises(ValueError):
                make()


def test_a_name_with_a_trailing_newline_is_no_tool_name() -> None:
    """``$`` matches before a final newline: ToolOutput took ``"final\\n"`` before one rule."""
    from juno_bind_trio.agent import ToolOutput

    with pytest.raises(ValueError, match="ToolOutput: name must be 1-64"):
        ToolOutput(int, name="final\n")
