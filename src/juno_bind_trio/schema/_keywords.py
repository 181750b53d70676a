"""What each provider dialect keeps, and what can be restated in words.

The tables change when a provider changes what it accepts; the rewriting
in ``_rewrite.py`` reads them and does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "ANNOTATIONS",
    "DESCRIBABLE",
    "GEMINI_FORMATS",
    "GEMINI_KEEP",
    "MAX_ALL_OF_MERGES",
    "STRICT_FORMATS",
    "STRICT_KEEP",
    "STRUCTURAL",
]

STRICT_KEEP: Final = frozenset(
    {
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
    }
)
STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
GEMINI_KEEP: Final = frozenset(
    {
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
)
GEMINI_FORMATS: Final[Mapping[str, frozenset[str]]] = {
    "string": frozenset({"date-time", "enum"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
# Constraints and annotations that still tell the model something when a dialect
# cannot enforce them: restated in the description rather than lost.
DESCRIBABLE: Final = frozenset(
    {
        "default",
        "examples",
        "const",
        "enum",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "dependentRequired",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
    }
)
# Handled by the rewriter itself, never by the generic keyword loop.
STRUCTURAL: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "$defs", "definitions"}
)
ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples", "$comment"})
MAX_ALL_OF_MERGES: Final = 64
