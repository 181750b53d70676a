"""A lean Gemini request's contents, system instruction and tools in the API's shape,
built here rather than by the SDK's walk.

``google-genai`` builds a request body in two passes over everything in it:
``types._GenerateContentParameters`` validates the arguments into pydantic
models (every content, part and schema), then
``models._GenerateContentParameters_to_mldev`` reads every field of every
part by path into the Gemini API's dict, and ``_common.convert_to_dict``
dumps the models it left in place. Measured on this machine (google-genai
3.6): 13.7 ms in one task step for a conversation of 81 messages with five
tools, about nine tenths of the turn's CPU. The lean path hands the SDK's
builder a placeholder where each large value goes (one empty content, an
empty tool list, a one-character system instruction), so the SDK still
builds the body's frame, the generation config from the request options, the
URL and the headers, and each placeholder keeps its key's place in the body;
then the values built here replace them, in the shape the SDK's walk gives
the values ``_convert.py`` makes (google-genai 3.6, Gemini API side):

* a content is ``{"parts": [...], "role": ...}``; a part's keys are in the
  order ``Part`` declares its fields and camelCase (``fileData``,
  ``functionCall``, ``functionResponse``, ``inlineData``, ``text``,
  ``thought``, ``thoughtSignature``); a ``functionCall``'s are ``id``,
  ``args``, ``name``;
* what the SDK sets as a model and dumps (a ``functionResponse``, a
  ``fileData``, an ``inlineData``, a function declaration and its schema)
  keeps the *field names*, snake_case, in the order the model declares them
  (``file_uri``; ``data``, ``display_name``, ``mime_type``; a schema's
  ``any_of`` … ``max_items`` … ``type``), without the fields that are ``None``;
* bytes (a thought signature, an image's data) are URL-safe base64 text;
* a schema's ``type`` is the upper-case name (``"OBJECT"``), its
  ``minimum`` and ``maximum`` floats; the function declarations are one tool,
  ``{"functionDeclarations": [...]}``.

Anything outside those shapes (a tool in Gemini's own shape such as
``google_search``, a schema keyword outside the ``gemini`` dialect, a value
of a type the SDK would coerce or refuse) makes the builder here answer
``None``, and that value goes through the SDK's walk as before, which then
coerces or raises as it always did. A test sends random conversations both
ways to the fake server and compares the bytes it received.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

__all__ = ["wire_contents", "wire_system", "wire_tools"]


class _NotOurs(Exception):
    """A value of a shape this module does not build: the SDK builds it instead."""


_PART_KEYS: Final = frozenset(
    {
        "file_data",
        "function_call",
        "function_response",
        "inline_data",
        "text",
        "thought",
        "thought_signature",
    }
)

_TYPES: Final = frozenset(
    {"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
)
_STR, _INT, _FLOAT, _BOOL, _STRS, _SCHEMA, _SCHEMAS, _PROPERTIES, _TYPE = range(9)
# A schema's keywords as the dialect spells them, in the order types.Schema declares
# their fields, with the field name the dump writes and what the value must be.
_SCHEMA_FIELDS: Final = (
    ("anyOf", "any_of", _SCHEMAS),
    ("description", "description", _STR),
    ("enum", "enum", _STRS),
    ("format", "format", _STR),
    ("items", "items", _SCHEMA),
    ("maxItems", "max_items", _INT),
    ("maxLength", "max_length", _INT),
    ("maxProperties", "max_properties", _INT),
    ("maximum", "maximum", _FLOAT),
    ("minItems", "min_items", _INT),
    ("minLength", "min_length", _INT),
    ("minProperties", "min_properties", _INT),
    ("minimum", "minimum", _FLOAT),
    ("nullable", "nullable", _BOOL),
    ("pattern", "pattern", _STR),
    ("properties", "properties", _PROPERTIES),
    ("required", "required", _STRS),
    ("type", "type", _TYPE),
)
_SCHEMA_KEYS: Final = frozenset(key for key, _field, _kind in _SCHEMA_FIELDS)
_FLOAT_EXACT: Final = 2**53  # an int beyond this is not the same number as a float


def wire_system(text: str) -> dict[str, Any]:
    """The ``systemInstruction`` the SDK makes of a system prompt *text*."""
    return {"parts": [{"text": text}], "role": "user"}


def wire_contents(contents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """``_convert.convert_messages``' contents as the body's ``contents``, or ``None`` where one
    is of a shape the SDK must build (it is then given them all)."""
    try:
        return [_content(content) for content in contents]
    except _NotOurs:
        return None


def wire_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """``_convert.convert_tools``' tools as the body's ``tools``, or ``None`` where they are not
    function declarations only (the SDK is then given them all)."""
    if len(tools) != 1:
        return None  # a tool in Gemini's own shape beside them, or none
    tool = tools[0]
    declarations = tool.get("function_declarations")
    if len(tool) != 1 or declarations.__class__ is not list or not declarations:
        return None
    try:
        return [{"functionDeclarations": [_dumped(d, _DECLARATION) for d in declarations]}]
    except _NotOurs:
        return None


def _b64(value: object) -> str:
    if value.__class__ is not bytes:
        raise _NotOurs
    return base64.urlsafe_b64encode(value).decode("ascii")


def _text(value: object) -> str:
    if value.__class__ is not str:
        raise _NotOurs
    return value


def _object(value: object, keys: frozenset[str]) -> dict[str, Any]:
    if value.__class__ is not dict or not keys.issuperset(value):
        raise _NotOurs
    return value


def _content(content: Mapping[str, Any]) -> dict[str, Any]:
    if content.__class__ is not dict or len(content) != 2:
        raise _NotOurs
    parts = content.get("parts")
    role = content.get("role")
    if parts.__class__ is not list or role.__class__ is not str:
        raise _NotOurs
    return {"parts": [_part(part) for part in parts], "role": role}


def _part(part: object) -> dict[str, Any]:
    given = _object(part, _PART_KEYS)
    get = given.get
    out: dict[str, Any] = {}
    value = get("file_data")
    if value is not None:
        out["fileData"] = _dumped(value, _FILE)
    value = get("function_call")
    if value is not None:
        out["functionCall"] = _dumped(value, _CALL)
    value = get("function_response")
    if value is not None:
        out["functionResponse"] = _dumped(value, _RESPONSE)
    value = get("inline_data")
    if value is not None:
        out["inlineData"] = _dumped(value, _BLOB)
    value = get("text")
    if value is not None:
        out["text"] = _text(value)
    value = get("thought")
    if value is not None:
        if value.__class__ is not bool:
            raise _NotOurs
        out["thought"] = value
    value = get("thought_signature")
    if value is not None:
        out["thoughtSignature"] = _b64(value)
    return out


def _dumped(value: object, model: _Model) -> dict[str, Any]:
    """*value* as the SDK dumps the model it sets from it: the fields in the model's order,
    each converted, those that are ``None`` left out."""
    fields, keys = model
    given = _object(value, keys)
    return {name: convert(given[name]) for name, convert in fields if given.get(name) is not None}


def _json_object(value: object) -> dict[str, Any]:
    # A dict[str, Any] field: validated, its values kept as they are (JSON here).
    if value.__class__ is not dict or not all(k.__class__ is str for k in value):
        raise _NotOurs
    return value


def _schema(node: object) -> dict[str, Any]:
    schema = _object(node, _SCHEMA_KEYS)
    out: dict[str, Any] = {}
    for key, field, kind in _SCHEMA_FIELDS:
        value = schema.get(key)
        if value is not None:
            out[field] = _value(kind, value)
    return out


def _value(kind: int, value: Any) -> Any:
    cls = value.__class__
    if kind == _STR:
        return _text(value)
    if kind == _INT:
        if cls is not int:
            raise _NotOurs
        return value
    if kind == _FLOAT:
        if cls is float:
            return value
        if cls is not int or not -_FLOAT_EXACT <= value <= _FLOAT_EXACT:
            raise _NotOurs
        return float(value)
    if kind == _BOOL:
        if cls is not bool:
            raise _NotOurs
        return value
    if kind == _STRS:
        if cls is not list:
            raise _NotOurs
        return [_text(item) for item in value]
    if kind == _SCHEMA:
        return _schema(value)
    if kind == _SCHEMAS:
        if cls is not list:
            raise _NotOurs
        return [_schema(item) for item in value]
    if kind == _PROPERTIES:
        if cls is not dict:
            raise _NotOurs
        return {_text(name): _schema(item) for name, item in value.items()}
    # _TYPE: the SDK's enum takes any spelling of a member's name, and dumps the member.
    if cls is not str or value.upper() not in _TYPES:
        raise _NotOurs
    return value.upper()


# The models the SDK sets and dumps, as (their fields in declared order, each with
# what its value must be; the field names), after the converters they name.
_Model: TypeAlias = "tuple[tuple[tuple[str, Callable[[Any], Any]], ...], frozenset[str]]"


def _model(*fields: tuple[str, Callable[[Any], Any]]) -> _Model:
    return fields, frozenset(name for name, _convert in fields)


_FILE: Final = _model(("display_name", _text), ("file_uri", _text), ("mime_type", _text))
_CALL: Final = _model(("id", _text), ("args", _json_object), ("name", _text))
_RESPONSE: Final = _model(("id", _text), ("name", _text), ("response", _json_object))
_BLOB: Final = _model(("data", _b64), ("display_name", _text), ("mime_type", _text))
_DECLARATION: Final = _model(("description", _text), ("name", _text), ("parameters", _schema))
