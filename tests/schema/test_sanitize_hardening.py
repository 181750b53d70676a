"""sanitize_tool_schema on schemas that are not JSON Schema, too deep, or cyclic.

Every refusal is a ``SchemaError`` whose ``pointer`` names the node; every
schema it does return passes the JSON Schema 2020-12 metaschema.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # jsonschema ships no type information
import pytest

from juno_bind_trio.schema import SCHEMA_DIALECTS, SchemaDialect, SchemaError, sanitize_tool_schema


def wrap(node: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": node}}


def json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


def items_chain(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "array", "items": node}
    return node


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
@pytest.mark.parametrize(
    ("node", "pointer", "fragment"),
    [
        ({"type": {}}, "/properties/a/type", "must be one of"),
        ({"type": [{}]}, "/properties/a/type", "must be one of"),
        ({"type": ["string", ["x"]]}, "/properties/a/type", "must be one of"),
        ({"type": None}, "/properties/a/type", "must be one of"),
        ({"type": "number", "minimum": None}, "/properties/a/minimum", "must be a number"),
        ({"type": "string", "maxLength": None}, "/properties/a/maxLength", "non-negative"),
        ({"type": "object", "required": None}, "/properties/a/required", "distinct names"),
        ({"type": "integer", "multipleOf": 0}, "/properties/a/multipleOf", "greater than 0"),
        ({"type": "array", "uniqueItems": "yes"}, "/properties/a/uniqueItems", "a boolean"),
        ({"type": "string", "pattern": "(unclosed"}, "/properties/a/pattern", "regular expr"),
        ({"type": "string", "examples": "x"}, "/properties/a/examples", "a list"),
        ({"type": "string", "default": math.nan}, "/properties/a/default", "JSON cannot"),
        ({"type": "string", "default": {1: "x"}}, "/properties/a/default", "not a string"),
        ({"type": "string", "const": b"x"}, "/properties/a/const", "not a JSON value"),
        ({"type": "integer", "maximum": 10**400}, "/properties/a/maximum", "largest double"),
    ],
)
def test_a_keyword_value_json_schema_forbids_is_refused_at_its_pointer(
    node: dict[str, Any], pointer: str, fragment: str, dialect: SchemaDialect
) -> None:
    with pytest.raises(SchemaError, match=fragment) as info:
        sanitize_tool_schema(wrap(node), dialect=dialect)
    assert info.value.pointer == pointer
    assert repr(pointer) in str(info.value)
    assert str(info.value).startswith("sanitize_tool_schema: ")


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
def test_a_schema_at_the_depth_limit_is_sanitized_and_one_past_it_refused(
    dialect: SchemaDialect,
) -> None:
    at_limit = wrap(items_chain(97))
    assert json_depth(at_limit) == 100
    result = sanitize_tool_schema(at_limit, dialect=dialect)
    jsonschema.Draft202012Validator.check_schema(result.schema)
    past = wrap(items_chain(98))
    with pytest.raises(SchemaError, match="nests more than 100 JSON levels deep") as info:
        sanitize_tool_schema(past, dialect=dialect)
    assert info.value.pointer.startswith("/properties/a/items/items")


@pytest.mark.parametrize("levels", [250, 1_000, 20_000])
@pytest.mark.parametrize("through", ["properties", "anyOf", "allOf", "enum"])
def test_a_schema_nested_hundreds_deep_is_a_schema_error_not_a_recursion_error(
    levels: int, through: str
) -> None:
    node: Any = {"type": "string"}
    for _ in range(levels):
        if through == "properties":
            node = {"type": "object", "properties": {"p": node}}
        elif through == "enum":
            node = [node]
        else:
            node = {through: [node]}
    schema = wrap({"enum": [node]} if through == "enum" else node)
    for dialect in SCHEMA_DIALECTS:
        with pytest.raises(SchemaError, match="nests more than 100"):
            sanitize_tool_schema(schema, dialect=dialect)


def test_definitions_that_inline_past_the_limit_are_refused_by_the_rewriter() -> None:
    # Each definition is shallow, but gemini inlines the whole chain into one tree.
    defs: dict[str, Any] = {}
    for k in range(8):
        inner: dict[str, Any] = {"$ref": f"#/$defs/D{k + 1}"} if k < 7 else {"type": "string"}
        defs[f"D{k}"] = _array_levels(20, inner)
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/D0"}}, "$defs": defs}
    with pytest.raises(SchemaError, match="once its \\$refs are inlined") as info:
        sanitize_tool_schema(schema, dialect="gemini")
    assert info.value.pointer.startswith("/$defs/D")
    # Strict mode keeps the references, so the same schema stays shallow there.
    result = sanitize_tool_schema(schema, dialect="openai_strict")
    jsonschema.Draft202012Validator.check_schema(result.schema)


def _array_levels(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    node = leaf
    for _ in range(levels):
        node = {"type": "array", "items": node}
    return node


CYCLES: list[dict[str, Any]] = [
    {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
    {"A": {"$ref": "#/$defs/A"}},
    {"A": {"$ref": "#/$defs/B", "minimum": 1}, "B": {"$ref": "#/$defs/A", "description": "b"}},
    {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/C"}, "C": {"$ref": "#/$defs/B"}},
]


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
@pytest.mark.parametrize("defs", CYCLES)
def test_a_ref_cycle_that_never_reaches_a_schema_is_refused_in_every_dialect(
    defs: dict[str, Any], dialect: SchemaDialect
) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": defs}
    with pytest.raises(SchemaError, match=r"\$ref cycle that never reaches a schema") as info:
        sanitize_tool_schema(schema, dialect=dialect)
    assert info.value.pointer in ("/properties/a", "/$defs/A", "/$defs/B", "/$defs/C")


def test_a_recursive_type_through_a_real_schema_is_still_kept_in_strict_mode() -> None:
    # A -> B -> A where B is an object: recursion, not a cycle of bare references.
    defs = {
        "A": {"$ref": "#/$defs/B"},
        "B": {"type": "object", "properties": {"next": {"$ref": "#/$defs/A"}}},
    }
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": defs}
    result = sanitize_tool_schema(schema, dialect="openai_strict")
    jsonschema.Draft202012Validator.check_schema(result.schema)
    out_defs = result.schema["$defs"]
    assert any("properties" in d for d in out_defs.values())


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
def test_a_non_string_key_anywhere_is_refused(dialect: SchemaDialect) -> None:
    with pytest.raises(SchemaError, match="has a key that is not a string") as info:
        sanitize_tool_schema(
            {"type": "object", "properties": {7: {"type": "string"}}}, dialect=dialect
        )
    assert info.value.pointer == "/properties"


@pytest.mark.parametrize("ref", ["#/$defs/99999999999999999999", "#/$defs/\u00b2", "#/enum/\u0663"])
def test_a_ref_with_an_odd_index_names_nothing(ref: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}, "$defs": {}, "enum": [1]}
    with pytest.raises(SchemaError, match="names nothing"):
        sanitize_tool_schema(schema, dialect="openai")
