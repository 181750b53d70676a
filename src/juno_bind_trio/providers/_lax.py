"""A count read from a stream event as the SDKs' models read it.

The lean stream paths hand the turn each event as the ``dict`` its JSON made;
the SDK paths, the ``to_dict()`` of the model the SDK built, whose fields
typed ``int`` were read leniently by pydantic (``"3"``, ``3.0`` and ``true``
become ``3``, ``3`` and ``1``) and left as they came when that fails. A
reader that takes both reads each such field through ``lax_int()``, so a
provider sending ``"3"`` counts 3 on either path, and a value that is no
count on one is none on the other.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["lax_count", "lax_index", "lax_int"]


@functools.cache
def _adapter() -> Any:
    import pydantic

    return pydantic.TypeAdapter(int)


def lax_int(value: object) -> int | None:
    """*value* as pydantic's lax mode reads an ``int``, or ``None`` where it is none."""
    if value.__class__ is int:
        return value
    import pydantic

    try:
        return _adapter().validate_python(value)  # type: ignore[no-any-return]
    except pydantic.ValidationError:
        return None


def lax_count(value: object) -> int:
    """*value* as a token count, by ``lax_int()``: ``TypeError`` (an event of the wrong
    shape) where it is no count."""
    if value.__class__ is int:
        return value
    coerced = lax_int(value)
    if coerced is None:
        raise TypeError(f"expected a token count, got {value!r}")
    return coerced


def lax_index(value: object) -> object:
    """*value* as an index, by ``lax_int()``, or as it came where it is none (for the
    tool-call accumulator to judge)."""
    if value.__class__ is int:
        return value
    coerced = lax_int(value)
    return value if coerced is None else coerced
