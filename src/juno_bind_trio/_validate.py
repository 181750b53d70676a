"""Argument checks shared by several public constructors.

Each raises the builtin that means the same thing, with a message that names
the function or class, the argument and the value, as every boundary check
in this package does.
"""

from __future__ import annotations

import functools
import inspect
import operator

__all__ = ["check_count", "is_async_callable"]


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
