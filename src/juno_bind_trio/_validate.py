"""Argument checks shared by several public constructors.

Each raises the builtin that means the same thing, with a message that names
the function or class, the argument and the value, as every boundary check
in this package does.
"""

from __future__ import annotations

import operator

__all__ = ["check_count"]


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
