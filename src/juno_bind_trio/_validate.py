"""Argument checks shared by several public constructors.

Each raises the builtin that means the same thing, with a message that names
the function or class, the argument and the value, as every boundary check
in this package does.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import reprlib
from typing import Final

__all__ = ["MAX_JSON_DEPTH", "check_count", "is_async_callable", "real_number", "shown"]

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


def check_count(where: str, value: object, *, minimum: int) -> int:
    """*value* as an ``int`` of at least *minimum* (0 or 1), or a clear error.

    *where* names the argument, ``"RoutePlan: max_retries"``. bool is an int,
    and ``True`` is never a count somebody meant; a float (nan above all: it
    compares false with everything) is refused rather than truncated, because
    the one job of such a number is to bound something. Anything with
    ``__index__`` (a numpy integer) is accepted as the integer it is.
    """
    kind = "a non-negative integer" if minimum == 0 else "a positive integer"
    if isinstance(value, (bool, float)):
        raise TypeError(f"{where} must be {kind}, got {value!r}")
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{where} must be {kind}, got {value!r}") from None
    if count < minimum:
        raise ValueError(f"{where} must be {kind}, got {count!r}")
    return count


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
