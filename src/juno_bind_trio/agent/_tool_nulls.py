"""``null`` for an optional parameter read as "not given": the arguments again without it.

OpenAI strict mode requires every property, so a model in strict mode writes
``null`` for the ones it means to leave out. When a call's first validation
fails, its arguments are read again with every such ``null`` removed (at any
depth, guided by the schema) before the failure is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from juno_bind_trio._json import follow_ref

__all__ = ["MAX_UNION_DEPTH", "drop_absent_nulls"]

# How deep unions nest inside unions in a schema before it is read as going no further.
MAX_UNION_DEPTH: Final = 32


def _accepts_null(schema: Any, root: Mapping[str, Any], depth: int = 0) -> bool:
    schema = follow_ref(schema, root)
    if not isinstance(schema, Mapping):
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        # Unions nest only as deep as the type that was written; a schema whose
        # union contains itself is read as refusing null past that.
        return depth < MAX_UNION_DEPTH and any(
            _accepts_null(option, root, depth + 1) for option in options
        )
    return kind is None and not options and "enum" not in schema and "const" not in schema


def _object_schema(value: Any, schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema *value* (a dict or a list) is read against: a union's option of its shape."""
    for _ in range(MAX_UNION_DEPTH):
        schema = follow_ref(schema, root)
        if not isinstance(schema, Mapping):
            return None
        options = schema.get("anyOf") or schema.get("oneOf")
        if not isinstance(options, list):
            return schema
        wanted = "object" if isinstance(value, dict) else "array"
        for option in options:
            resolved = follow_ref(option, root)
            if isinstance(resolved, Mapping) and resolved.get("type") == wanted:
                schema = resolved
                break
        else:
            return None
    return None


def drop_absent_nulls(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """*value* without the ``null`` of every optional property whose schema refuses ``null``.

    Walked with a stack of its own, not by recursion: arguments nested as
    deep as the JSON parser reads (a recursive model a few hundred levels
    down) are read again here like any other, never a ``RecursionError``.
    The containers are copied; everything else is shared.
    """
    if not isinstance(value, dict | list):
        return value
    top: list[Any] = [None]
    # (a value to copy, its schema, the container to put the copy in, the key or index)
    stack: list[tuple[Any, Any, Any, Any]] = [(value, schema, top, 0)]
    while stack:
        item, sub, parent, slot = stack.pop()
        node = _object_schema(item, sub, root) if isinstance(item, dict | list) else None
        if isinstance(item, dict):
            properties = None if node is None else node.get("properties")
            if not isinstance(properties, Mapping):
                parent[slot] = item
                continue
            assert node is not None
            required = set(node.get("required") or ())
            cleaned: dict[str, Any] = {}
            parent[slot] = cleaned
            for key, entry in item.items():
                inner = properties.get(key)
                if inner is None:
                    cleaned[key] = entry
                elif entry is None and key not in required and not _accepts_null(inner, root):
                    continue
                elif isinstance(entry, dict | list):
                    cleaned[key] = None  # keeps the key order; filled from the stack
                    stack.append((entry, inner, cleaned, key))
                else:
                    cleaned[key] = entry
        elif isinstance(item, list):
            items = None if node is None else node.get("items")
            if not isinstance(items, Mapping):
                parent[slot] = item
                continue
            copied: list[Any] = list(item)
            parent[slot] = copied
            for index, entry in enumerate(item):
                if isinstance(entry, dict | list):
                    stack.append((entry, items, copied, index))
        else:  # pragma: no cover - only containers are pushed
            parent[slot] = item
    return top[0]
