"""Schema test helpers: a real validator, and each dialect's rules checked independently."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # jsonschema ships no type information

STRICT_KEYWORDS = {
    "type",
    "description",
    "title",
    "enum",
    "anyOf",
    "properties",
    "required",
    "items",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "additionalProperties",
    "$ref",
    "$defs",
}
GEMINI_KEYWORDS = {
    "type",
    "description",
    "nullable",
    "enum",
    "anyOf",
    "properties",
    "required",
    "items",
    "format",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
}


def is_valid(schema: dict[str, Any], value: Any) -> bool:
    jsonschema.Draft202012Validator.check_schema(schema)
    return bool(jsonschema.Draft202012Validator(schema).is_valid(value))


def gemini_as_json_schema(schema: Any) -> Any:
    """Gemini's ``nullable: true`` spelled in JSON Schema, for a JSON Schema validator."""
    if isinstance(schema, list):
        return [gemini_as_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: (
            {n: gemini_as_json_schema(s) for n, s in v.items()}
            if k == "properties"
            else gemini_as_json_schema(v)
        )
        for k, v in schema.items()
        if k != "nullable"
    }
    if schema.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema node, the root first."""
    if not isinstance(schema, dict):
        return
    yield schema
    for key in ("properties", "$defs"):
        for sub in schema.get(key, {}).values():
            yield from subschemas(sub)
    for sub in schema.get("anyOf", []):
        yield from subschemas(sub)
    if "items" in schema:
        yield from subschemas(schema["items"])


def assert_strict_shape(schema: dict[str, Any]) -> None:
    """OpenAI strict mode's rules, as its documentation states them."""
    assert schema["type"] == "object"
    assert "anyOf" not in schema
    for node in subschemas(schema):
        assert set(node) <= STRICT_KEYWORDS, set(node) - STRICT_KEYWORDS
        if "$ref" in node:
            assert set(node) == {"$ref"}, node
            continue
        assert {"type", "anyOf", "enum"} & set(node), node
        kinds = node.get("type")
        if kinds == "object" or (isinstance(kinds, list) and "object" in kinds):
            assert node["additionalProperties"] is False, node
            assert node["required"] == list(node["properties"]), node


def assert_gemini_shape(schema: dict[str, Any]) -> None:
    """Gemini's function-declaration subset: no references, one type, string enums."""
    assert schema["type"] == "object"
    for node in subschemas(schema):
        assert set(node) <= GEMINI_KEYWORDS, set(node) - GEMINI_KEYWORDS
        assert "type" not in node or isinstance(node["type"], str), node
        assert node.get("type") != "null", node
        if "enum" in node:
            assert node["type"] == "string"
            assert all(isinstance(v, str) for v in node["enum"]), node
        if "format" in node:
            assert (node["type"], node["format"]) in {
                ("string", "date-time"),
                ("string", "enum"),
                ("number", "float"),
                ("number", "double"),
                ("integer", "int32"),
                ("integer", "int64"),
            }
