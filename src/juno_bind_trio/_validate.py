"""One way to check an argument: rules built by a few factories, one exception per fault.

Every public boundary of this package refuses a bad argument the same way.
A value of the wrong *type* (a str where a count goes, ``None`` where a
function goes, ``True`` where seconds go) raises ``TypeError``; a value of the
right type that is still wrong (``-1`` as a count, ``nan`` seconds, ``""`` as a
name, ``"fast"`` where one of ``"trio"`` / ``"asyncio"`` goes) raises
``ValueError``. Both say where, what was wanted and what came, in one shape:
``"TurnTextStream: max_resets must be a non-negative integer, got -1"``.

A [Rule][] is what one argument must be: a phrase for the message and the
reading that accepts or refuses. The factories below build them
(``count(minimum=1)``, ``positive_seconds(zero=True)``, ``one_of("a", "b")``,
``optional(async_callable())``), and they compose the way attrs validators
do. A rule is used in one of two ways:

* in a function, ``rule.check(where, value)`` returns the value as the rule
  reads it (a count as an ``int``, seconds as a ``float``) or raises;
* on an attrs field, the rule *is* the validator
  (``attrs.field(validator=a_bool())``), and names ``"Class: field"`` itself.

A rule is never used on a hot path: it is for what a host passes once, at
construction or at the start of a call.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import re
import reprlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Generic, TypeGuard, TypeVar, final, overload

__all__ = [
    "MAX_JSON_DEPTH",
    "Rule",
    "a_bool",
    "a_callable",
    "a_mapping",
    "a_number",
    "a_str",
    "any_of",
    "async_callable",
    "count",
    "error_kind",
    "having",
    "instance_of",
    "is_async_callable",
    "is_tool_name",
    "matching",
    "non_empty_str",
    "one_of",
    "optional",
    "positive_seconds",
    "real_number",
    "sequence_of",
    "shown",
]

T = TypeVar("T")

MAX_JSON_DEPTH: Final = 500
"""How deep a JSON value may nest (containers inside containers) anywhere in this package.

Tool-call arguments, the values hashed for receipts and tool schemas are
read by recursive code on both sides of the wire (Python's own ``json``
gives up near 1,000 levels). Real ones nest a handful of levels; a value
past this limit is refused with a ``ValueError`` (or the package error of
the function that reads it) instead of exhausting the stack.
"""

_SHOWN: Final = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = 80
_SHOWN.maxother = 80
_SHOWN.maxlong = 40

# The function-name rule of OpenAI-compatible APIs, which every tool name keeps.
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_tool_name(value: object) -> TypeGuard[str]:
    """Whether *value* is a name a model can call a tool by: a ``str`` of 1 to 64 letters,
    digits, ``_`` or ``-`` (the function-name rule of OpenAI-compatible APIs).

    Checked where a tool is named (``ToolDef``, ``@tool``, ``Tool.from_schema``,
    ``ToolOutput``, an MCP server's tools), so a bad name fails there, not as a
    400 on the first request that offers it.
    """
    return isinstance(value, str) and _TOOL_NAME.fullmatch(value) is not None


def shown(value: object) -> str:
    """A short ``repr`` of *value* for an error message, whatever *value* is.

    Bounded in depth and length, so naming a value nested thousands of levels
    deep, or an integer of a million digits, costs nothing and cannot fail;
    an object whose own ``repr`` raises is named by its type.
    """
    try:
        return _SHOWN.repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"


def error_kind(
    value: object, kind: type[Any] | tuple[type[Any], ...]
) -> type[TypeError] | type[ValueError]:
    """The exception that refuses *value* where a *kind* was wanted, by the one rule.

    ``ValueError`` when *value* is of *kind* (it has the right type and a wrong
    value: ``""`` where a non-empty ``str`` goes), ``TypeError`` when it is not.
    For a check written by hand: ``raise error_kind(name, str)(f"...")``.
    """
    return ValueError if isinstance(value, kind) else TypeError


def real_number(value: object) -> float | None:
    """*value* as a ``float`` if it is an ``int`` or a ``float`` (not a bool), else ``None``.

    An integer past the largest double (``10**400``) is infinite here, as it
    is to every reader that holds numbers as doubles: a span of seconds that
    long is longer than any finite one. So a check for "a finite number of
    seconds" refuses it with a ``ValueError``, and one that takes ``math.inf``
    for "never" accepts it as that, instead of ``float()`` raising
    ``OverflowError`` from inside.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def is_async_callable(value: object) -> bool:
    """Whether calling *value* gives a coroutine: an ``async def`` function or method,
    an object whose ``__call__`` is one, or a ``functools.partial`` of either.

    A port or handler that is not would fail on every call, far from the code
    that wired it; its owner refuses it where it is given instead. A function
    marked with ``inspect.markcoroutinefunction`` counts, so its owner still
    checks at run time that what it returned can be awaited.
    """
    while isinstance(value, functools.partial):
        value = value.func
    if not callable(value):
        return False
    # The type's __call__, which is what a call runs: one set on the instance is ignored.
    call = getattr(type(value), "__call__", None)  # noqa: B004 - reading it, not testing callability
    return inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(call)


# --- the rule ----------------------------------------------------------------------


@final
class Rule(Generic[T]):
    """What one argument must be: *expects*, in words, and *read*, which holds a value to it.

    *read* returns the value as the rule reads it, or raises a bare
    ``TypeError`` (the value is of the wrong type) or ``ValueError`` (the right
    type, a wrong value); the rule adds the message. Build rules with the
    factories of this module rather than by hand.
    """

    __slots__ = ("_read", "expects")

    def __init__(self, expects: str, read: Callable[[object], T]) -> None:
        self.expects: Final = expects
        self._read: Final = read

    def check(self, where: str, value: object) -> T:
        """*value* as this rule reads it, or ``TypeError`` / ``ValueError`` naming *where*.

        *where* says whose argument it is, ``"RoutePlan: max_retries"``.
        """
        try:
            return self._read(value)
        except TypeError:
            raise TypeError(self.message(where, value)) from None
        except ValueError:
            raise ValueError(self.message(where, value)) from None

    def message(self, where: str, value: object) -> str:
        """The sentence a refusal of *value* says: where, what was wanted, what came."""
        return f"{where} must be {self.expects}, got {shown(value)}"

    def __call__(self, instance: object, attribute: Any, value: T) -> None:
        """The attrs validator protocol: *where* is the class and the field's argument name."""
        self.check(f"{type(instance).__name__}: {attribute.alias}", value)

    def __repr__(self) -> str:
        return f"Rule({self.expects!r})"


# --- the factories -----------------------------------------------------------------


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def count(*, minimum: int = 0) -> Rule[int]:
    """An integer of at least *minimum*: ``int``, or anything with ``__index__``.

    ``True`` is never a count somebody meant, and a float (``1.5``, and above
    all ``nan``, which compares false with every bound) is refused as the wrong
    type rather than truncated: the one job of such a number is to bound
    something. Below *minimum* is a ``ValueError``.
    """
    if minimum == 0:
        expects = "a non-negative integer"
    elif minimum == 1:
        expects = "a positive integer"
    else:
        expects = f"an integer of at least {minimum}"

    def read(value: object) -> int:
        if isinstance(value, bool | float):
            raise TypeError
        number = operator.index(value)  # type: ignore[arg-type]  # TypeError for the rest
        if number < minimum:
            raise ValueError
        return number

    return Rule(expects, read)


def a_number(*, minimum: float | None = None, finite: bool = True) -> Rule[float]:
    """An ``int`` or ``float`` (not a bool) of at least *minimum*, as a ``float``.

    ``nan`` is always a wrong value; infinity is one unless *finite* is false.
    An integer past the largest double reads as infinite (see [real_number][]).
    """
    words = "a finite number" if finite else "a number"
    expects = words if minimum is None else f"{words} of at least {minimum:g}"

    def read(value: object) -> float:
        number = real_number(value)
        if number is None:
            raise TypeError
        if math.isnan(number) or (finite and math.isinf(number)):
            raise ValueError
        if minimum is not None and number < minimum:
            raise ValueError
        return number

    return Rule(expects, read)


def positive_seconds(*, zero: bool = False, infinite: bool = False) -> Rule[float]:
    """A span of seconds, as a ``float``: more than 0, and finite.

    ``zero=True`` takes ``0`` too (where it means "at once" or "skip"),
    ``infinite=True`` takes ``math.inf`` (where it means "never"). ``nan`` and
    a negative span are wrong values; a bool, a string, ``None`` are the wrong type.
    """
    sign = "non-negative" if zero else "positive"
    expects = f"a {sign} number of seconds" if infinite else f"a {sign} finite number of seconds"

    def read(value: object) -> float:
        seconds = real_number(value)
        if seconds is None:
            raise TypeError
        if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not zero):
            raise ValueError
        if math.isinf(seconds) and not infinite:
            raise ValueError
        return seconds

    return Rule(expects, read)


def _is_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError
    return value


_A_BOOL: Final = Rule("a bool", _is_bool)


def a_bool() -> Rule[bool]:
    """``True`` or ``False``; ``0``, ``1`` and ``None`` are the wrong type."""
    return _A_BOOL


def _is_str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def _is_non_empty_str(value: object) -> str:
    text = _is_str(value)
    if text == "":
        raise ValueError
    return text


def _is_non_blank_str(value: object) -> str:
    text = _is_str(value)
    if text.strip() == "":
        raise ValueError
    return text


_A_STR: Final = Rule("a str", _is_str)
_NON_EMPTY_STR: Final = Rule("a non-empty str", _is_non_empty_str)
_NON_BLANK_STR: Final = Rule("a non-blank str", _is_non_blank_str)


def a_str() -> Rule[str]:
    """Any ``str``, the empty one included."""
    return _A_STR


def non_empty_str(*, blank: bool = True) -> Rule[str]:
    """A ``str`` with at least one character: an id, a name, a label.

    ``blank=False`` refuses one of only whitespace too (a provider's name,
    which a person reads).
    """
    return _NON_EMPTY_STR if blank else _NON_BLANK_STR


def matching(pattern: str, expects: str) -> Rule[str]:
    """A ``str`` that *pattern* matches whole; *expects* says in words what it matches."""
    compiled = re.compile(pattern)

    def read(value: object) -> str:
        text = _is_str(value)
        if compiled.fullmatch(text) is None:
            raise ValueError
        return text

    return Rule(expects, read)


def one_of(*members: T) -> Rule[T]:
    """One of *members* (strings, enum members): anything else of their type is a wrong
    value, a value of another type is the wrong type."""
    if not members:
        raise ValueError("one_of: give at least one member")
    kinds = tuple({type(member) for member in members})
    allowed = frozenset(members)
    expects = "one of " + ", ".join(shown(member) for member in members)

    def read(value: object) -> T:
        if not isinstance(value, kinds):
            raise TypeError
        if value not in allowed:
            raise ValueError
        return value

    return Rule(expects, read)


@overload
def instance_of(kind: type[T], /, *, expects: str | None = None) -> Rule[T]: ...
@overload
def instance_of(*kinds: type[Any], expects: str | None = None) -> Rule[Any]: ...
def instance_of(*kinds: type[Any], expects: str | None = None) -> Rule[Any]:
    """An instance of one of *kinds*; anything else is the wrong type.

    *expects* defaults to the class names (``"a RunDeadline"``).
    """
    if not kinds:
        raise ValueError("instance_of: give at least one class")
    words = expects or " or ".join(_a(kind.__name__) for kind in kinds)

    def read(value: object) -> object:
        if not isinstance(value, kinds):
            raise TypeError
        return value

    return Rule(words, read)


def _is_mapping(value: object) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise TypeError
    return value


_A_MAPPING: Final = Rule("a mapping", _is_mapping)


def a_mapping() -> Rule[Mapping[Any, Any]]:
    """A ``Mapping`` (a dict, or anything registered as one)."""
    return _A_MAPPING


def _is_callable(value: object) -> Callable[..., Any]:
    if not callable(value):
        raise TypeError
    return value


def _is_async_callable(value: object) -> Callable[..., Awaitable[Any]]:
    if not is_async_callable(value):
        raise TypeError
    return value  # type: ignore[return-value]  # checked just above


_A_CALLABLE: Final = Rule("callable", _is_callable)
_ASYNC_CALLABLE: Final = Rule("an async function", _is_async_callable)


def a_callable() -> Rule[Callable[..., Any]]:
    """Anything that can be called."""
    return _A_CALLABLE


def async_callable() -> Rule[Callable[..., Awaitable[Any]]]:
    """A function whose call gives a coroutine: ``async def``, an object whose
    ``__call__`` is one, or a ``functools.partial`` of either (see [is_async_callable][]).

    A synchronous function is the wrong type: it would fail on every call,
    far from the code that wired it.
    """
    return _ASYNC_CALLABLE


def having(attribute: str, rule: Rule[Any], *, expects: str) -> Rule[Any]:
    """An object whose *attribute* passes *rule* (a duck type: a stop, a sink).

    No such attribute, or one the rule refuses, is the wrong type.
    """

    def read(value: object) -> object:
        try:
            found = getattr(value, attribute)
        except AttributeError:
            raise TypeError from None
        try:
            rule._read(found)
        except ValueError:
            raise TypeError from None
        return value

    return Rule(expects, read)


def sequence_of(
    rule: Rule[T], *, non_empty: bool = False, expects: str | None = None
) -> Rule[tuple[T, ...]]:
    """A list, tuple or other iterable whose every item passes *rule*, read as a tuple.

    A str, bytes or a mapping is the wrong type even though it iterates: one
    passed where a list was meant would otherwise be read item by item into
    nonsense. An item the rule refuses is refused the same way (wrong type or
    wrong value); ``non_empty=True`` makes an empty one a wrong value.
    """
    words = expects or (f"a {'non-empty ' if non_empty else ''}sequence, each item {rule.expects}")

    def read(value: object) -> tuple[T, ...]:
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
            raise TypeError
        items = tuple(rule._read(item) for item in value)
        if non_empty and not items:
            raise ValueError
        return items

    return Rule(words, read)


def optional(rule: Rule[T]) -> Rule[T | None]:
    """``None``, or what *rule* accepts."""

    def read(value: object) -> T | None:
        return None if value is None else rule._read(value)

    return Rule(f"{rule.expects} or None", read)


def any_of(*rules: Rule[Any], expects: str | None = None) -> Rule[Any]:
    """What the first of *rules* to accept it reads it as.

    When every rule refuses, a ``ValueError`` if any refused the value (it
    was of a type one of them takes), else a ``TypeError``.
    """
    if not rules:
        raise ValueError("any_of: give at least one rule")
    words = expects or " or ".join(rule.expects for rule in rules)

    def read(value: object) -> object:
        wrong_value = False
        for rule in rules:
            try:
                return rule._read(value)
            except TypeError:
                continue
            except ValueError:
                wrong_value = True
        if wrong_value:
            raise ValueError
        raise TypeError

    return Rule(words, read)
