"""Every public callable of the package, found by walking each subpackage's ``__all__``.

Subpackages are found on disk, not listed here, so one added later is walked
too. A subpackage whose optional dependency is not installed (an extra) is
skipped; any other import failure fails the walk.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from typing import Any

import juno_bind_trio

__all__ = ["is_public_callable", "public_callables", "public_modules"]


def public_modules() -> Iterator[str]:
    """``juno_bind_trio`` and every subpackage or module below it without a ``_`` part."""
    yield juno_bind_trio.__name__
    for info in pkgutil.walk_packages(juno_bind_trio.__path__, "juno_bind_trio.", onerror=_raise):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield info.name


def _raise(name: str) -> None:
    raise ImportError(f"cannot walk {name}")


def _import(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == "juno_bind_trio" or missing.startswith("juno_bind_trio."):
            raise
        return None  # an optional extra that is not installed


def is_public_callable(value: object) -> bool:
    """A function, or a class a host can construct (not a Protocol, TypedDict or alias)."""
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return True
    if not isinstance(value, type):
        return False
    return not (getattr(value, "_is_protocol", False) or typing.is_typeddict(value))


def public_callables() -> dict[int, tuple[str, Callable[..., Any]]]:
    """``id(callable) -> (first public name, callable)``; a re-export is one callable."""
    found: dict[int, tuple[str, Callable[..., Any]]] = {}
    for name in public_modules():
        module = _import(name)
        if module is None:
            continue
        for attr in getattr(module, "__all__", ()):
            value = getattr(module, attr)
            if is_public_callable(value):
                found.setdefault(id(value), (f"{name}.{attr}", value))
    return found
