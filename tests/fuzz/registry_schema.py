"""Fuzz entries for `juno_bind_trio.schema`: schemas valid, invalid, deep and cyclic."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import jsonschema  # type: ignore[import-untyped]  # jsonschema ships no type information
from fuzz_support import JUNK, Call, Entry, call

from juno_bind_trio.schema import (
    SCHEMA_DIALECTS,
    SanitizeResult,
    SchemaChange,
    SchemaError,
    sanitize_tool_schema,
)

TYPES = ["string", "number", "integer", "boolean", "array", "object", "null"]
NAMES = st.sampled_from(["a", "b", "c", "x/y", "~"])

# A keyword's value: mostly sensible, sometimes junk (type: {}, minimum: null, ...).
_values: dict[str, st.SearchStrategy[Any]] = {
    "type": st.one_of(st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), max_size=3)),
    "minimum": st.one_of(st.integers(-5, 5), st.floats(allow_nan=False)),
    "maximum": st.integers(-5, 50),
    "minLength": st.integers(0, 5),
    "maxItems": st.integers(0, 5),
    "pattern": st.just("^a*$"),
    "format": st.sampled_from(["date-time", "email", "int32", "float", "weird"]),
    "enum": st.lists(st.one_of(st.none(), st.integers(0, 3), st.text(max_size=2)), max_size=3),
    "const": st.one_of(st.none(), st.integers(0, 3), st.text(max_size=2)),
    "description": st.text(max_size=6),
    "title": st.text(max_size=4),
    "default": st.one_of(st.none(), st.integers(0, 3)),
    "$ref": st.sampled_from(["#", "#/$defs/A", "#/$defs/B", "#/definitions/C", "#/nope", "x"]),
    "additionalProperties": st.booleans(),
    "uniqueItems": st.booleans(),
}


@st.composite
def schema_node(draw: st.DrawFn, depth: int = 0) -> Any:
    if depth > 3 or draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(st.booleans(), JUNK)) if draw(st.booleans()) else {}
    node: dict[str, Any] = {}
    for keyword in draw(st.lists(st.sampled_from(sorted(_values)), max_size=4, unique=True)):
        node[keyword] = draw(st.one_of(_values[keyword], _values[keyword], JUNK))
    if draw(st.booleans()):
        node["properties"] = draw(
            st.dictionaries(NAMES, schema_node(depth + 1), max_size=3)
            | JUNK.filter(lambda v: not isinstance(v, dict))
        )
        if draw(st.booleans()):
            node["required"] = draw(st.one_of(st.lists(NAMES, max_size=3, unique=True), JUNK))
    for keyword in draw(st.lists(st.sampled_from(["anyOf", "oneOf", "allOf"]), max_size=1)):
        node[keyword] = draw(st.lists(schema_node(depth + 1), max_size=3) | JUNK)
    if draw(st.booleans()):
        node["items"] = draw(schema_node(depth + 1))
    return node


@st.composite
def tool_schema(draw: st.DrawFn) -> Any:
    root = draw(schema_node())
    if isinstance(root, dict) and draw(st.booleans()):
        key = draw(st.sampled_from(["$defs", "definitions"]))
        root[key] = draw(st.dictionaries(st.sampled_from(["A", "B", "C"]), schema_node(1)))
    return root


def nested(depth: int, keyword: str) -> dict[str, Any]:
    """A schema *depth* levels deep through *keyword* (built without recursion)."""
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        if keyword == "properties":
            node = {"type": "object", "properties": {"p": node}}
        elif keyword == "items":
            node = {"type": "array", "items": node}
        else:
            node = {keyword: [node]}
    return {"type": "object", "properties": {"root": node}}


DEEP_SCHEMAS = st.builds(
    nested,
    st.sampled_from([10, 60, 64, 65, 250, 1000]),
    st.sampled_from(["properties", "items", "anyOf", "allOf"]),
)

CYCLES = st.sampled_from(
    [
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        },
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"$ref": "#/$defs/A"}},
        },
        {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}},
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A", "description": "d"}},
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        },
    ]
)

SCHEMA_CALLS = st.builds(
    lambda schema, dialect: call(schema, dialect=dialect),
    st.one_of(tool_schema(), tool_schema(), DEEP_SCHEMAS, CYCLES, JUNK),
    st.one_of(st.sampled_from(SCHEMA_DIALECTS), st.sampled_from(SCHEMA_DIALECTS), JUNK),
)


def _pure_ref_cycle(schema: dict[str, Any]) -> bool:
    defs = schema.get("$defs", {})
    for start in defs:
        seen = set()
        name = start
        while name in defs and set(defs[name]) == {"$ref"}:
            if name in seen:
                return True
            seen.add(name)
            name = defs[name]["$ref"].removeprefix("#/$defs/")
    return False


def sanitized_is_a_valid_schema(arguments: Call, result: Any) -> None:
    assert isinstance(result, SanitizeResult)
    # The output is a JSON Schema by the metaschema (gemini's nullable aside).
    jsonschema.Draft202012Validator.check_schema(_without_nullable(result.schema))
    assert result.schema.get("type") == "object"
    assert not _pure_ref_cycle(result.schema)


def _without_nullable(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: _without_nullable(v) for k, v in schema.items() if k != "nullable"}


def names_the_pointer(arguments: Call, error: BaseException) -> None:
    assert isinstance(error, SchemaError)
    assert isinstance(error.pointer, str)
    assert error.pointer == "" or error.pointer.startswith("/")
    assert (repr(error.pointer) if error.pointer else "the root schema") in str(error) or (
        repr(error.pointer) in str(error)
    ), (str(error), error.pointer)


ENTRIES = [
    Entry(
        sanitize_tool_schema,
        args=SCHEMA_CALLS,
        raises=(SchemaError,),
        check=sanitized_is_a_valid_schema,
        check_error=names_the_pointer,
    ),
    Entry(SanitizeResult),
    Entry(SchemaChange),
]
