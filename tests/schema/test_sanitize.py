"""sanitize_tool_schema on the schemas users actually write: pydantic, hand-written, nested."""

from __future__ import annotations

import copy
import pickle
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from schema_checks import (
    assert_gemini_shape,
    assert_strict_shape,
    gemini_as_json_schema,
    is_valid,
)

from juno_bind_trio.schema import (
    SCHEMA_DIALECTS,
    SchemaChange,
    SchemaDialect,
    SchemaError,
    sanitize_tool_schema,
)

# --- real schemas ---------------------------------------------------------------


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")
    zip: str | None = None


class PlaceOrder(BaseModel):
    """Place an order for delivery."""

    lines: list[Address] = Field(min_length=1)
    unit: Literal["kg", "lb"] = "kg"
    quantity: int = Field(3, ge=1, le=10)
    home: Address = Field(description="where to deliver")
    note: str = Field("", max_length=200)


class Node(BaseModel):
    name: str
    children: list[Node] = []
    parent: Node | None = Field(None, description="the parent node")


class WithMap(BaseModel):
    name: str
    tags: dict[str, int] = {}


ORDER = PlaceOrder.model_json_schema()
NODE = Node.model_json_schema()
WITH_MAP = WithMap.model_json_schema()

# Hand-written, draft-07 style: `definitions`, a $ref with a sibling, oneOf, const.
SEARCH: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "filters": {
            "type": "array",
            "items": {"$ref": "#/definitions/filter"},
            "maxItems": 5,
        },
        "sort": {"$ref": "#/definitions/sort", "description": "result order"},
        "page": {"oneOf": [{"type": "integer", "minimum": 1}, {"const": "last"}]},
    },
    "required": ["query"],
    "definitions": {
        "filter": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "enum": ["author", "year"]},
                "ranges": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}},
                        "required": ["from"],
                    },
                },
            },
            "required": ["field"],
        },
        "sort": {"type": "string", "enum": ["newest", "relevance"]},
        "unused": {"type": "object", "additionalProperties": True},
    },
}

ORDER_VALUE = PlaceOrder.model_validate(
    {
        "lines": [{"street": "1 Main St", "city": "Oslo"}],
        "home": {"street": "2 High St", "city": "Bergen", "zip": "5003"},
    }
).model_dump(mode="json", exclude_unset=True)
SEARCH_VALUE: dict[str, Any] = {
    "query": "trio",
    "filters": [{"field": "year", "ranges": [{"from": 2020}, {"from": 1, "to": 2}]}],
    "page": "last",
}


def test_pydantic_model_in_strict_mode() -> None:
    result = sanitize_tool_schema(ORDER, dialect="openai_strict")
    schema = result.schema
    assert_strict_shape(schema)
    props = schema["properties"]
    assert props["unit"] == {
        "enum": ["kg", "lb", None],
        "title": "Unit",
        "type": ["string", "null"],
        "description": 'default: "kg"',
    }
    assert props["quantity"]["type"] == ["integer", "null"]
    assert (props["quantity"]["minimum"], props["quantity"]["maximum"]) == (1, 10)
    assert props["note"]["description"] == 'default: ""; maxLength: 200'
    # The $ref with a sibling description is inlined; the bare one stays a $ref.
    assert props["home"]["description"] == "where to deliver"
    assert props["home"]["additionalProperties"] is False
    assert props["lines"]["items"] == {"$ref": "#/$defs/Address"}
    address = schema["$defs"]["Address"]
    assert address["required"] == ["street", "city", "zip"]
    assert address["properties"]["zip"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "title": "Zip",
    }
    assert (
        SchemaChange(
            pointer="/properties/unit",
            action="made_required",
            keyword="required",
            detail="optional property 'unit' made nullable and required: null means absent",
        )
        in result.changes
    )


def test_a_free_form_map_is_refused_in_strict_mode_naming_the_property() -> None:
    with pytest.raises(SchemaError) as info:
        sanitize_tool_schema(WITH_MAP, dialect="openai_strict")
    assert info.value.pointer == "/properties/tags"
    assert "dialect='openai'" in str(info.value)
    # The other dialects can say it.
    for dialect in ("gemini", "anthropic", "openai"):
        sanitize_tool_schema(WITH_MAP, dialect=dialect)


def test_pydantic_model_for_gemini() -> None:
    result = sanitize_tool_schema(ORDER, dialect="gemini")
    schema = result.schema
    assert_gemini_shape(schema)
    zip_code = schema["properties"]["home"]["properties"]["zip"]
    assert zip_code == {"type": "string", "nullable": True}
    assert schema["properties"]["home"]["description"] == "where to deliver"
    assert schema["properties"]["lines"]["items"]["required"] == ["street", "city"]
    assert schema["required"] == ["lines", "home"]
    actions = {(c.pointer, c.action, c.keyword) for c in result.changes}
    assert ("/properties/home", "inlined_ref", "$ref") in actions
    assert ("/$defs", "removed", "$defs") in actions


def test_recursive_model_keeps_references_in_strict_mode() -> None:
    result = sanitize_tool_schema(NODE, dialect="openai_strict")
    schema = result.schema
    assert_strict_shape(schema)
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    # The sibling description of a recursive $ref stays outside it, in the wrapper.
    assert schema["properties"]["parent"] == {
        "anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}],
        "description": "the parent node",
    }
    assert set(schema["$defs"]) == {"Node"}
    assert result.changes[0].describe() == "(root): inlined the root $ref to '/$defs/Node'"


def test_recursive_model_is_refused_for_gemini_naming_the_reference() -> None:
    with pytest.raises(SchemaError) as info:
        sanitize_tool_schema(NODE, dialect="gemini")
    assert info.value.pointer == "/$defs/Node/properties/children/items"
    assert "recursive" in str(info.value)


def test_hand_written_schema_with_definitions_in_strict_mode() -> None:
    result = sanitize_tool_schema(SEARCH, dialect="openai_strict")
    schema = result.schema
    assert_strict_shape(schema)
    assert set(schema["$defs"]) == {"filter"}  # sort inlined (it had a sibling), unused dropped
    assert schema["properties"]["filters"]["items"] == {"$ref": "#/$defs/filter"}
    ranges = schema["$defs"]["filter"]["properties"]["ranges"]
    assert ranges["items"]["required"] == ["from", "to"]
    assert ranges["items"]["properties"]["to"]["type"] == ["integer", "null"]
    assert schema["properties"]["page"]["anyOf"][1] == {"enum": ["last"]}
    assert schema["properties"]["sort"]["enum"] == ["newest", "relevance", None]
    assert "$schema" not in schema
    assert schema["properties"]["query"]["description"] == "minLength: 1"
    keywords = {(c.pointer, c.keyword) for c in result.changes}
    assert ("/definitions/filter", "definitions") in keywords
    assert ("/definitions/unused", "definitions") in keywords
    assert ("/properties/page", "oneOf") in keywords


def test_hand_written_schema_for_gemini() -> None:
    schema = sanitize_tool_schema(SEARCH, dialect="gemini").schema
    assert_gemini_shape(schema)
    page = schema["properties"]["page"]["anyOf"]
    assert page == [{"type": "integer", "minimum": 1}, {"enum": ["last"], "type": "string"}]


def test_nested_arrays_of_objects_are_closed_at_every_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "matrix": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"cell": {"type": "object", "properties": {}}},
                    },
                },
            }
        },
    }
    out = sanitize_tool_schema(schema, dialect="openai_strict").schema
    assert_strict_shape(out)
    cell_holder = out["properties"]["matrix"]["type"]
    assert cell_holder == ["array", "null"]
    inner = out["properties"]["matrix"]["items"]["items"]
    assert inner["additionalProperties"] is False
    assert inner["properties"]["cell"]["type"] == ["object", "null"]
    assert inner["properties"]["cell"]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("schema", "value"),
    [(ORDER, ORDER_VALUE), (SEARCH, SEARCH_VALUE), (NODE, {"name": "a", "children": []})],
)
@pytest.mark.parametrize("dialect", ["gemini", "anthropic", "openai"])
def test_real_values_stay_valid(schema: dict[str, Any], value: Any, dialect: SchemaDialect) -> None:
    assert is_valid(schema, value)
    try:
        out = sanitize_tool_schema(schema, dialect=dialect).schema
    except SchemaError:
        assert (schema, dialect) == (NODE, "gemini")
        return
    assert is_valid(gemini_as_json_schema(out), value)


def test_real_values_stay_valid_in_strict_mode_with_absent_spelled_null() -> None:
    out = sanitize_tool_schema(ORDER, dialect="openai_strict").schema
    value = copy.deepcopy(ORDER_VALUE)
    value.update(unit=None, quantity=None, note=None)
    value["lines"][0]["zip"] = None
    assert is_valid(out, value)
    assert not is_valid(out, ORDER_VALUE)  # absence is no longer an option: that is the point


def test_allof_is_merged_and_a_clash_refused() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "who": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            }
        },
        "required": ["who"],
    }
    who = sanitize_tool_schema(schema, dialect="gemini").schema["properties"]["who"]
    assert who == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    clash = copy.deepcopy(schema)
    clash["properties"]["who"]["allOf"][1]["properties"]["a"] = {"type": "integer"}
    with pytest.raises(SchemaError) as info:
        sanitize_tool_schema(clash, dialect="openai_strict")
    assert info.value.pointer == "/properties/who/allOf/1/properties/a"


def test_gemini_moves_non_string_enums_and_formats_into_the_description() -> None:
    schema = {
        "type": "object",
        "properties": {
            "level": {"type": "integer", "enum": [1, 2, 3], "description": "how loud"},
            "when": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "either": {"type": ["string", "integer", "null"]},
        },
    }
    props = sanitize_tool_schema(schema, dialect="gemini").schema["properties"]
    assert props["level"] == {"type": "integer", "description": "how loud (enum: [1, 2, 3])"}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["mail"] == {"type": "string", "description": 'format: "email"'}
    assert props["either"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}],
        "nullable": True,
    }


def test_anthropic_and_openai_keep_the_schema_as_written() -> None:
    for dialect in ("anthropic", "openai"):
        result = sanitize_tool_schema(ORDER, dialect=dialect)
        assert result.schema == ORDER
        assert result.changes == ()
        assert not result.changed
    result = sanitize_tool_schema({"properties": {}, "$schema": "x"}, dialect="anthropic")
    assert result.schema == {"properties": {}, "type": "object"}
    assert [c.action for c in result.changes] == ["added", "removed"]


def test_a_no_argument_tool_is_an_empty_closed_object() -> None:
    assert sanitize_tool_schema({}, dialect="openai_strict").schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
@pytest.mark.parametrize("schema", [ORDER, SEARCH, NODE, WITH_MAP])
def test_input_never_mutated_and_output_shares_nothing(
    schema: dict[str, Any], dialect: SchemaDialect
) -> None:
    before = copy.deepcopy(schema)
    try:
        result = sanitize_tool_schema(schema, dialect=dialect)
    except SchemaError:
        assert schema == before
        return
    assert schema == before
    for node in _walk(result.schema):
        node["poison"] = True
    assert schema == before


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
@pytest.mark.parametrize("schema", [ORDER, SEARCH, NODE, WITH_MAP])
def test_sanitizing_twice_changes_nothing_more(
    schema: dict[str, Any], dialect: SchemaDialect
) -> None:
    try:
        once = sanitize_tool_schema(schema, dialect=dialect)
    except SchemaError:
        return
    twice = sanitize_tool_schema(once.schema, dialect=dialect)
    assert twice.schema == once.schema
    assert twice.changes == ()


# --- refusals ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "pointer", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"type": "strng"}}}, "/properties/a/type", "strng"),
        ({"properties": {"a": []}}, "/properties/a", "must be a schema"),
        ({"properties": {"a": {"type": "array", "items": [{}]}}}, "/properties/a/items", "tuple"),
        ({"properties": {}, "required": "a"}, "/required", "distinct names"),
        ({"properties": {"a": {"$ref": "#/$defs/Missing"}}}, "/properties/a", "names nothing"),
        ({"properties": {"a": {"$ref": "https://x.test/s.json"}}}, "/properties/a", "not local"),
        ({"properties": {"a": {"exclusiveMinimum": True}}}, "/properties/a/exclusiveMinimum", ""),
        ({"properties": {"a": {"anyOf": []}}}, "/properties/a/anyOf", "non-empty"),
        ({"properties": {"a": {"maxLength": -1}}}, "/properties/a/maxLength", "non-negative"),
        ({"type": "string"}, "", "must be an object schema"),
        ({"anyOf": [{"type": "object"}]}, "", "must be an object schema"),
        ({"$defs": {"a~b/c": {"type": 3}}}, "/$defs/a~0b~1c/type", "got 3"),
    ],
)
@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
def test_an_invalid_schema_is_refused_naming_the_pointer(
    schema: dict[str, Any], pointer: str, fragment: str, dialect: SchemaDialect
) -> None:
    with pytest.raises(SchemaError) as info:
        sanitize_tool_schema(schema, dialect=dialect)
    assert info.value.pointer == pointer
    assert fragment in str(info.value)
    assert str(info.value).startswith("sanitize_tool_schema: ")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"properties": {"any": {}}}, "/properties/any"),
        ({"properties": {"free": {"type": "object", "patternProperties": {}}}}, "/properties/free"),
        ({"properties": {"pair": {"type": "array", "prefixItems": [{}]}}}, "/properties/pair"),
        ({"properties": {"never": False}}, "/properties/never"),
    ],
)
def test_shapes_strict_mode_cannot_express_are_refused(
    schema: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(SchemaError) as info:
        sanitize_tool_schema(schema, dialect="openai_strict")
    assert info.value.pointer == pointer


def test_only_null_is_refused_for_gemini() -> None:
    with pytest.raises(SchemaError) as info:
        sanitize_tool_schema({"properties": {"n": {"type": "null"}}}, dialect="gemini")
    assert info.value.pointer == "/properties/n"


def test_wrong_argument_types_are_refused() -> None:
    with pytest.raises(TypeError, match=r"^sanitize_tool_schema: schema must be .* got list"):
        sanitize_tool_schema([], dialect="gemini")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^sanitize_tool_schema: dialect must be .* 'grok'"):
        sanitize_tool_schema({}, dialect="grok")  # type: ignore[arg-type]


def test_schema_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(SchemaError("sanitize_tool_schema: bad", "/a")))
    assert (str(error), error.pointer) == ("sanitize_tool_schema: bad", "/a")


def _walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node, *(n for v in list(node.values()) for n in _walk(v))]
    if isinstance(node, list):
        return [n for v in node for n in _walk(v)]
    return []
