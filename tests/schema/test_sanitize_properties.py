"""The promise, over generated schemas: a valid, representable value stays valid after sanitizing.

Each example is a schema drawn together with a value valid under it (and, for
strict mode, the same value with every absent optional property spelled
``null``, the only way strict mode can say "absent"). A real JSON Schema
validator judges both sides, so the check does not trust the sanitizer's own
idea of what the keywords mean.
"""

from __future__ import annotations

import copy
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from schema_checks import assert_gemini_shape, assert_strict_shape, gemini_as_json_schema, is_valid

from juno_bind_trio.schema import SchemaDialect, sanitize_tool_schema

ABSENT = object()
Drawn = tuple[dict[str, Any], Any, Any]  # schema, value, the value as strict mode spells it

words = st.text(alphabet="abcxyz", min_size=0, max_size=4)


@st.composite
def leaf(draw: st.DrawFn) -> Drawn:
    choice = draw(st.sampled_from(["string", "integer", "number", "boolean", "enum", "const"]))
    schema: dict[str, Any]
    value: Any
    if choice == "string":
        low = draw(st.integers(0, 2))
        schema = {"type": "string", "minLength": low, "maxLength": low + 3}
        if draw(st.booleans()):
            schema["pattern"] = "^[a-z]*$"
        if draw(st.booleans()):
            schema["format"] = draw(st.sampled_from(["date-time", "email", "uuid", "weird"]))
            value = "x" * low
            # Formats are annotations for the validator unless asserted: any string goes.
        else:
            value = draw(st.text(alphabet="abc", min_size=low, max_size=low + 3))
    elif choice == "integer":
        low = draw(st.integers(-5, 5))
        schema = {"type": "integer", "minimum": low, "exclusiveMaximum": low + 10}
        if draw(st.booleans()):
            schema["multipleOf"] = 1
        value = draw(st.integers(low, low + 9))
    elif choice == "number":
        schema = {"type": "number", "maximum": 100}
        value = draw(st.floats(-100, 100, allow_nan=False))
    elif choice == "boolean":
        schema = {"type": "boolean"}
        value = draw(st.booleans())
    elif choice == "enum":
        options = draw(
            st.one_of(
                st.lists(words, min_size=1, max_size=3, unique=True),
                st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True),
            )
        )
        schema = {"enum": options}
        if draw(st.booleans()):
            schema["type"] = "string" if isinstance(options[0], str) else "integer"
        value = draw(st.sampled_from(options))
    else:
        const = draw(st.one_of(words, st.integers(0, 3)))
        schema = {"const": const}
        value = const
    if draw(st.booleans()):
        schema["description"] = draw(words)
    if draw(st.booleans()):
        schema["title"] = "T"
    return schema, value, value


@st.composite
def node(draw: st.DrawFn, depth: int, defs: dict[str, Any]) -> Drawn:
    kinds = ["leaf", "leaf", "nullable"] + (["object", "array", "ref", "union"] if depth else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        return draw(leaf())
    if kind == "nullable":
        schema, value, strict = draw(leaf())
        if "type" in schema and "enum" not in schema and draw(st.booleans()):
            wrapped = {**schema, "type": [schema["type"], "null"]}
        else:
            wrapped = {"anyOf": [schema, {"type": "null"}], "default": None}
        if draw(st.booleans()):
            return wrapped, None, None
        return wrapped, value, strict
    if kind == "object":
        return draw(obj(depth - 1, defs))
    if kind == "array":
        item, value, strict = draw(node(depth - 1, defs))
        count = draw(st.integers(0, 3))
        schema = {"type": "array", "items": item, "maxItems": 3}
        if draw(st.booleans()):
            schema["uniqueItems"] = False
        return schema, [copy.deepcopy(value)] * count, [copy.deepcopy(strict)] * count
    if kind == "ref":
        target, value, strict = draw(obj(depth - 1, defs))
        name = f"D{len(defs)}"
        defs[name] = target
        ref: dict[str, Any] = {"$ref": f"#/$defs/{name}"}
        if draw(st.booleans()):
            ref["description"] = "a referenced object"
        return ref, value, strict
    # union: two branches of different types, as pydantic writes `int | Model`
    left, lvalue, lstrict = draw(leaf().filter(lambda d: d[0].get("type") == "integer"))
    right, rvalue, rstrict = draw(obj(depth - 1, defs))
    key = draw(st.sampled_from(["anyOf", "oneOf"]))
    if draw(st.booleans()):
        return {key: [left, right]}, lvalue, lstrict
    return {key: [left, right]}, rvalue, rstrict


@st.composite
def obj(draw: st.DrawFn, depth: int, defs: dict[str, Any]) -> Drawn:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=3))
    properties: dict[str, Any] = {}
    value: dict[str, Any] = {}
    strict: dict[str, Any] = {}
    required = []
    for name in names:
        schema, v, s = draw(node(depth, defs))
        properties[name] = schema
        if draw(st.booleans()):
            required.append(name)
            value[name], strict[name] = v, s
        elif draw(st.booleans()):
            value[name], strict[name] = v, s
        else:
            strict[name] = None  # absent: strict mode spells it null
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    if draw(st.booleans()):
        out["additionalProperties"] = False
    return out, value, strict


@st.composite
def tool_schema(draw: st.DrawFn) -> Drawn:
    defs: dict[str, Any] = {}
    schema, value, strict = draw(obj(2, defs))
    if defs:
        schema["$defs"] = defs
    return schema, value, strict


DIALECTS: list[SchemaDialect] = ["openai_strict", "gemini", "anthropic", "openai"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_schema(), st.sampled_from(DIALECTS))
def test_a_valid_value_stays_valid_after_sanitizing(drawn: Drawn, dialect: SchemaDialect) -> None:
    schema, value, strict_value = drawn
    assert is_valid(schema, value), "the generator drew a value its own schema rejects"
    before = copy.deepcopy(schema)
    result = sanitize_tool_schema(schema, dialect=dialect)
    assert schema == before
    if dialect == "openai_strict":
        assert_strict_shape(result.schema)
        assert is_valid(result.schema, strict_value)
    elif dialect == "gemini":
        assert_gemini_shape(result.schema)
        assert is_valid(gemini_as_json_schema(result.schema), value)
    else:
        assert is_valid(result.schema, value)
    again = sanitize_tool_schema(result.schema, dialect=dialect)
    assert again.changes == ()
    assert again.schema == result.schema
