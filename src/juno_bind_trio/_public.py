"""Make the public names report the module a user imports them from.

Each public ``__init__`` ends with ``publish(__name__, globals(), __all__)``.
Classes and functions defined in a private module (``juno_bind_trio.loop._loop``)
then carry the subpackage that exports them as ``__module__``
(``juno_bind_trio.loop``), so ``help()``, reprs of classes, tracebacks and
pickles name the path a user can import. A name already published by an
earlier ``__init__`` keeps its first public home, and an exception always
reports the top level (``juno_bind_trio.UsageError``), wherever else it is
re-exported.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

__all__ = ["publish"]

# The modules the exception tree is defined in (``_errors`` and the part it re-exports).
_ERROR_MODULES = frozenset({"juno_bind_trio._errors", "juno_bind_trio._errors_base"})


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def publish(module: str, namespace: MutableMapping[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` of each class and function in *names* to *module*.

    Only objects whose current ``__module__`` is a private module of this
    package are changed; constants, type aliases and objects from elsewhere
    are left alone.
    """
    for name in names:
        obj = namespace[name]
        if not isinstance(obj, type) and not callable(obj):
            continue
        current = getattr(obj, "__module__", None)
        if not isinstance(current, str) or not current.startswith("juno_bind_trio."):
            continue
        if not _is_private(current) or getattr(obj, "__name__", None) != name:
            continue
        if current in _ERROR_MODULES and module != "juno_bind_trio":
            # The exception tree's home is the top level, whichever subpackage
            # happens to be imported (and re-export an exception) first.
            continue
        try:
            obj.__module__ = module
        except (AttributeError, TypeError):  # a builtin or a typing construct: leave it
            continue
