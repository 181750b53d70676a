"""Reading a JSON schema: the structural check every dialect runs first, and ``$ref`` lookup.

A tool schema usually comes from a generator (pydantic, zod-to-json-schema) or
from a hand-written dict, and providers answer a malformed one with a 400
that names neither the tool nor the spot. So the schema is checked here,
whole, before any rewriting, and every error names the JSON pointer (RFC
6901) of the offending node in the schema as the caller wrote it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import unquote

from juno_bind_trio._errors import SchemaError
from juno_bind_trio._validate import shown

MAX_SCHEMA_DEPTH: Final = 100
"""How deep a tool schema may nest, counting every JSON object and array in it.

Each property of an object is two levels (``properties``, then the name), so
this allows objects fifty deep; generated schemas put their models in
``$defs`` and nest a few levels. Past it the schema is refused with a
[`SchemaError`][juno_bind_trio.SchemaError] naming the pointer, instead of exhausting the stack of
every recursive reader on the way (this one's, a validator's, a provider's).
"""

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
        elif (
            isinstance(node, list)
            and key.isascii()
            and key.isdigit()
            and len(key) < 10
            and int(key) < len(node)
        ):
            node = node[int(key)]
        else:
            raise SchemaError(
                f"sanitize_tool_schema: $ref {ref!r} at {at!r} names nothing in the schema", at
            )
    return node, pointer


def check_schema(root: Mapping[str, Any]) -> None:
    """Refuse a structurally invalid schema, naming the first bad node's pointer."""
    check_json(root)
    _check(root, root, "")


def check_json(root: object) -> None:
    """Refuse what is not a JSON document, or nests past ``MAX_SCHEMA_DEPTH``.

    Walked without recursion, before anything recursive reads the schema:
    keys must be strings, numbers finite, and every value one JSON has.
    """
    stack: list[tuple[object, str, int]] = [(root, "", 1)]
    while stack:
        node, pointer, depth = stack.pop()
        if isinstance(node, Mapping):
            items: list[tuple[str | int, object]] = []
            for key in node:
                if not isinstance(key, str):
                    raise _fail(pointer, f"has a key that is not a string: {shown(key)}")
                items.append((key, node[key]))
        elif isinstance(node, list):
            items = list(enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool) and node.bit_length() > 1024:
            raise _fail(pointer, "is an integer past the largest double, which no provider reads")
        elif node is None or isinstance(node, str | bool | int):
            continue
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise _fail(pointer, f"is {node!r}, which JSON cannot represent")
            continue
        else:
            raise _fail(pointer, f"is a {type(node).__name__}, which is not a JSON value")
        if depth > MAX_SCHEMA_DEPTH:
            raise _fail(
                pointer,
                f"nests more than {MAX_SCHEMA_DEPTH} JSON levels deep (the tool schema depth "
                "limit); move the inner models into $defs",
            )
        stack.extend((value, child(pointer, key), depth + 1) for key, value in items)


def _fail(pointer: str, problem: str) -> SchemaError:
    return SchemaError(f"sanitize_tool_schema: {where(pointer)} {problem}", pointer)


def _check(root: Mapping[str, Any], node: object, pointer: str) -> None:
    if isinstance(node, bool):
        return
    if not isinstance(node, Mapping):
        raise _fail(pointer, f"must be a schema (an object or a boolean), got {_kind(node)}")
    if "type" in node:
        kind = node["type"]
        kinds = kind if isinstance(kind, list) else [kind]
        if (
            not kinds
            or any(not isinstance(k, str) or k not in TYPES for k in kinds)
            or len(set(kinds)) < len(kinds)
        ):
            raise _fail(
                child(pointer, "type"),
                f"must be one of {', '.join(sorted(TYPES))} or a list of distinct ones, "
                f"got {shown(kind)}",
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
                    child(pointer, key), f"must be a non-empty list of schemas, got {shown(value)}"
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
    if "required" in node and (
        not isinstance(required, list)
        or not all(isinstance(r, str) for r in required)
        or len(set(required)) < len(required)
    ):
        raise _fail(
            child(pointer, "required"), f"must be a list of distinct names, got {shown(required)}"
        )
    if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
        raise _fail(child(pointer, "enum"), f"must be a non-empty list, got {shown(node['enum'])}")
    for key in _NUMBERS:
        if key not in node:
            continue
        value = node[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            hint = (
                " (the draft-04 boolean form: give the bound itself)"
                if isinstance(value, bool)
                else ""
            )
            raise _fail(child(pointer, key), f"must be a number, got {shown(value)}{hint}")
        if key == "multipleOf" and not value > 0:
            raise _fail(child(pointer, key), f"must be greater than 0, got {shown(value)}")
    for key in _COUNTS:
        if key not in node:
            continue
        value = node[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _fail(child(pointer, key), f"must be a non-negative integer, got {shown(value)}")
    for key, (accepts, what) in _OTHER_KEYWORDS.items():
        if key in node and not accepts(node[key]):
            raise _fail(child(pointer, key), f"must be {what}, got {shown(node[key])}")
    for key in _STRINGS:
        if key in node and not isinstance(node[key], str):
            raise _fail(child(pointer, key), f"must be a string, got {_kind(node[key])}")
    if "pattern" in node and not _is_regex(node["pattern"]):
        raise _fail(
            child(pointer, "pattern"), f"must be a regular expression, got {shown(node['pattern'])}"
        )
    if "patternProperties" in node:
        for name in node["patternProperties"]:
            if not _is_regex(name):
                raise _fail(
                    child(pointer, "patternProperties", name),
                    "is named by an invalid regular expression",
                )
    if "$ref" in node:
        resolve(root, node["$ref"], pointer)
        _refuse_empty_cycle(root, node, pointer)


# A node with a $ref applies the schema it names, whatever else it says; a
# chain of such nodes that comes back to itself is a regress with no end,
# which no validator or provider can evaluate (A = B and B = A).
def _refuse_empty_cycle(root: Mapping[str, Any], node: Mapping[str, Any], pointer: str) -> None:
    seen = [pointer]
    target, at = resolve(root, node["$ref"], pointer)
    while isinstance(target, Mapping) and "$ref" in target:
        if at in seen:
            chain = " -> ".join(repr(p or "#") for p in [*seen[seen.index(at) :], at])
            raise _fail(
                pointer,
                f"refers into a $ref cycle that never reaches a schema ({chain}): it says nothing "
                "a provider can use",
            )
        seen.append(at)
        target, at = resolve(root, target["$ref"], at)


def _is_string_list(value: object) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(v, str) for v in value)
        and len(set(value)) == len(value)
    )


def _is_regex(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


# Keywords with a value the JSON Schema 2020-12 metaschema constrains, beyond
# the schema-valued ones above: an output must pass the metaschema, so an
# input that does not is refused here, before any dialect keeps it as written.
_OTHER_KEYWORDS: Final[Mapping[str, tuple[Callable[[object], bool], str]]] = {
    "uniqueItems": (_is_bool, "a boolean"),
    "deprecated": (_is_bool, "a boolean"),
    "readOnly": (_is_bool, "a boolean"),
    "writeOnly": (_is_bool, "a boolean"),
    "examples": (lambda v: isinstance(v, list), "a list"),
    "minContains": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "a non-negative integer",
    ),
    "maxContains": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "a non-negative integer",
    ),
    "dependentRequired": (
        lambda v: isinstance(v, Mapping) and all(_is_string_list(x) for x in v.values()),
        "a map of names to lists of distinct names",
    ),
    "$comment": (_is_str, "a string"),
    "$id": (_is_str, "a string"),
    "$schema": (_is_str, "a string"),
    "$anchor": (_is_str, "a string"),
    "contentEncoding": (_is_str, "a string"),
    "contentMediaType": (_is_str, "a string"),
}


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
