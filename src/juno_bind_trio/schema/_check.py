"""Reading a JSON schema: the structural check every dialect runs first, and ``$ref`` lookup.

A tool schema usually comes from a generator (pydantic, zod-to-json-schema) or
from a hand-written dict, and providers answer a malformed one with a 400
that names neither the tool nor the spot. So the schema is checked here,
whole, before any rewriting, and every error names the JSON pointer (RFC
6901) of the offending node in the schema as the caller wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from juno_bind_trio._errors import SchemaError

TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})

_SCHEMA_MAPS: Final = (
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
)
_SCHEMA_LISTS: Final = ("prefixItems", "anyOf", "oneOf", "allOf")
_SCHEMA_VALUES: Final = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)
_NUMBERS: Final = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COUNTS: Final = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)
_STRINGS: Final = ("description", "title", "pattern", "format", "$ref")


def child(pointer: str, *keys: str | int) -> str:
    """The JSON pointer of a node below *pointer* (``~`` and ``/`` escaped)."""
    for key in keys:
        pointer += "/" + str(key).replace("~", "~0").replace("/", "~1")
    return pointer


def where(pointer: str) -> str:
    return f"the schema at {pointer!r}" if pointer else "the root schema"


def resolve(root: Mapping[str, Any], ref: str, at: str) -> tuple[Any, str]:
    """The node a local ``$ref`` names, and its pointer; [`SchemaError`][juno_bind_trio.SchemaError]
    if there is none."""
    if not ref.startswith("#"):
        raise SchemaError(
            f"sanitize_tool_schema: $ref {ref!r} at {at!r} is not local; only references "
            "into the same schema ('#/$defs/Name') can be sanitized",
            at,
        )
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        raise SchemaError(
            f"sanitize_tool_schema: $ref {ref!r} at {at!r} is not a JSON pointer "
            "(anchors are not supported)",
            at,
        )
    node: Any = root
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaError(
                f"sanitize_tool_schema: $ref {ref!r} at {at!r} names nothing in the schema", at
            )
    return node, pointer


def check_schema(root: Mapping[str, Any]) -> None:
    """Refuse a structurally invalid schema, naming the first bad node's pointer."""
    _check(root, root, "")


def _fail(pointer: str, problem: str) -> SchemaError:
    return SchemaError(f"sanitize_tool_schema: {where(pointer)} {problem}", pointer)


def _check(root: Mapping[str, Any], node: object, pointer: str) -> None:
    if isinstance(node, bool):
        return
    if not isinstance(node, Mapping):
        raise _fail(pointer, f"must be a schema (an object or a boolean), got {_kind(node)}")
    kind = node.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if (
            not kinds
            or any(k not in TYPES for k in kinds)
            or len(set(map(str, kinds))) < len(kinds)
        ):
            raise _fail(
                child(pointer, "type"),
                f"must be one of {', '.join(sorted(TYPES))} or a list of distinct ones, "
                f"got {kind!r}",
            )
    for key in _SCHEMA_MAPS:
        if key in node:
            value = node[key]
            if not isinstance(value, Mapping):
                raise _fail(child(pointer, key), f"must map names to schemas, got {_kind(value)}")
            for name, sub in value.items():
                _check(root, sub, child(pointer, key, name))
    for key in _SCHEMA_LISTS:
        if key in node:
            value = node[key]
            if not isinstance(value, list) or not value:
                raise _fail(
                    child(pointer, key), f"must be a non-empty list of schemas, got {value!r}"
                )
            for i, sub in enumerate(value):
                _check(root, sub, child(pointer, key, i))
    for key in _SCHEMA_VALUES:
        if key in node:
            if key == "items" and isinstance(node[key], list):
                raise _fail(
                    child(pointer, key),
                    "is a list: that is the draft-04 tuple form; use prefixItems",
                )
            _check(root, node[key], child(pointer, key))
    required = node.get("required")
    if required is not None and (
        not isinstance(required, list)
        or not all(isinstance(r, str) for r in required)
        or len(set(required)) < len(required)
    ):
        raise _fail(
            child(pointer, "required"), f"must be a list of distinct names, got {required!r}"
        )
    if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
        raise _fail(child(pointer, "enum"), f"must be a non-empty list, got {node['enum']!r}")
    for key in _NUMBERS:
        value = node.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            hint = (
                " (the draft-04 boolean form: give the bound itself)"
                if isinstance(value, bool)
                else ""
            )
            raise _fail(child(pointer, key), f"must be a number, got {value!r}{hint}")
    for key in _COUNTS:
        value = node.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise _fail(child(pointer, key), f"must be a non-negative integer, got {value!r}")
    for key in _STRINGS:
        if key in node and not isinstance(node[key], str):
            raise _fail(child(pointer, key), f"must be a string, got {_kind(node[key])}")
    if "$ref" in node:
        resolve(root, node["$ref"], pointer)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
