"""The fuzz holds every public callable to one rule: TypeError for a wrong type, ValueError
for a wrong value (``check_error_kind`` in ``fuzz_support.py``).

These tests pin the judge itself: what it counts as a value "of its annotated type", and
that a callable breaking the rule in either direction fails the fuzz.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import pytest
from fuzz_support import Call, Entry, conforms, judge

from juno_bind_trio._validate import error_kind


class _Thing:
    pass


@pytest.mark.parametrize(
    ("value", "hint", "verdict"),
    [
        ("", str, True),
        (b"", str, False),
        (None, str, False),
        (True, int, False),
        (3, int, True),
        (3, float, True),
        (math.nan, float, True),  # a wrong value, not a wrong type
        (True, float, False),
        (True, bool, True),
        ("x", Literal["a", "b"], True),  # a str where one of two strs goes: a wrong value
        (None, Literal["a", "b"], False),
        (None, str | None, True),
        (1.5, str | None, False),
        ([1, 2], Sequence[int], True),
        ([1, "2"], Sequence[int], False),
        ("ab", Sequence[str], False),
        ({"a": 1}, Iterable[str], None),  # a mapping where an iterable of items goes
        ((1, "a"), tuple[int, str], True),
        ((1,), tuple[int, str], False),
        ({"a": 1}, Mapping[str, int], True),
        ({0: 1}, Mapping[str, int], None),  # what a mapping holds is data
        ([], Mapping[str, int], False),
        (print, Callable[..., Any], None),  # a signature cannot be checked here
        (3, Callable[..., Any], False),
        (_Thing(), _Thing, True),
        (object(), _Thing, False),
        (object(), Any, None),
    ],
)
def test_what_counts_as_a_value_of_its_annotated_type(
    value: object, hint: object, verdict: bool | None
) -> None:
    assert conforms(value, hint) is verdict


def named(name: str) -> str:
    """A callable that refuses an empty name as the wrong *type*: against the rule."""
    given: object = name
    if not isinstance(given, str) or not given:
        raise TypeError(f"named: name must be a non-empty str, got {name!r}")
    return name


def counted(count: int, label: str) -> int:
    """A callable that refuses a str count as a wrong *value*: against the rule."""
    given: object = count
    if not isinstance(given, int) or given < 0:
        raise ValueError(f"counted: count must be a non-negative int, got {count!r}")
    return count


def careful(name: str) -> str:
    """The same check as ``named``, by the rule."""
    given: object = name
    if not isinstance(given, str) or not given:
        raise error_kind(given, str)(f"careful: name must be a non-empty str, got {name!r}")
    return name


def test_a_type_error_for_a_value_of_the_right_type_fails_the_fuzz() -> None:
    with pytest.raises(AssertionError, match="refusing a value is a ValueError"):
        judge(Entry(named), Call(("",)))
    judge(Entry(named), Call((None,)))  # None is the wrong type: TypeError is right


def test_a_value_error_naming_the_one_argument_of_a_wrong_type_fails_the_fuzz() -> None:
    with pytest.raises(AssertionError, match="a wrong type is a TypeError"):
        judge(Entry(counted), Call(("3", "x")))
    judge(Entry(counted), Call((-1, "x")))  # -1 is the right type, a wrong value


def test_a_callable_by_the_rule_passes_both_ways() -> None:
    judge(Entry(careful), Call(("",)))
    judge(Entry(careful), Call((None,)))


def test_error_kind_picks_by_the_type_of_the_value() -> None:
    assert error_kind("", str) is ValueError
    assert error_kind(None, str) is TypeError
    assert error_kind(b"", (str, bytes)) is ValueError
