"""What sanitization reports: the dialects, and one record per change it made."""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

__all__ = [
    "SCHEMA_DIALECTS",
    "SanitizeResult",
    "SchemaChange",
    "SchemaChangeAction",
    "SchemaDialect",
]

SchemaDialect = Literal["openai_strict", "openai", "gemini", "anthropic"]
"""The provider dialects [`sanitize_tool_schema()`][juno_bind_trio.schema.sanitize_tool_schema]
writes."""

SCHEMA_DIALECTS: Final[tuple[SchemaDialect, ...]] = (
    "openai_strict",
    "openai",
    "gemini",
    "anthropic",
)
"""Every [`SchemaDialect`][juno_bind_trio.schema.SchemaDialect], in a stable order."""

SchemaChangeAction = Literal[
    "added", "removed", "moved_to_description", "made_required", "inlined_ref", "rewritten"
]
"""What sanitization did at one place in the schema (see
[`SchemaChange`][juno_bind_trio.schema.SchemaChange])."""


@attrs.frozen(kw_only=True)
class SchemaChange:
    """One change [`sanitize_tool_schema()`][juno_bind_trio.schema.sanitize_tool_schema] made.

    ``pointer`` is the JSON pointer of the node **in the schema you passed**
    (``""`` for the root), so every change can be traced to where you wrote
    it; a definition inlined in several places is reported once, at the
    definition. ``keyword`` is the keyword concerned; ``detail`` says what
    was done in words.

    ``action`` is one of ``"added"`` (a keyword the dialect requires, such as
    ``additionalProperties: false``), ``"removed"`` (a keyword the dialect
    rejects and that says nothing to the model), ``"moved_to_description"``
    (a constraint the dialect cannot enforce, restated in ``description`` so
    the model still reads it), ``"made_required"`` (strict mode: an optional
    property made required and, if it was not already, nullable),
    ``"inlined_ref"`` (a ``$ref`` replaced by the schema it names) or
    ``"rewritten"`` (one form changed into an equivalent or wider one the
    dialect accepts, such as ``oneOf`` into ``anyOf``).
    """

    pointer: str
    action: SchemaChangeAction
    keyword: str
    detail: str

    def describe(self) -> str:
        """One line for a log: where, then what."""
        return f"{self.pointer or '(root)'}: {self.detail}"


@attrs.frozen(kw_only=True)
class SanitizeResult:
    """What [`sanitize_tool_schema()`][juno_bind_trio.schema.sanitize_tool_schema] returns.

    ``schema`` is a new dict sharing nothing mutable with the one you passed;
    ``changes`` lists every change in the order made (empty: the schema was
    already acceptable and ``schema`` equals it).
    """

    schema: dict[str, Any]
    changes: tuple[SchemaChange, ...]
    dialect: SchemaDialect

    @property
    def changed(self) -> bool:
        """Whether sanitization changed anything."""
        return bool(self.changes)
