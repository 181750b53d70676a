"""Structured output: the ``response_format`` an ``output_type`` asks for, and its check.

A pydantic model, a dataclass or a TypedDict is an object at the root and is
asked for as it is. Anything else (``int``, ``list[str]``, a ``Literal``)
is wrapped in ``{"result": ...}``, because providers' structured-output modes
want an object at the root, and unwrapped after validation.

The format is strict (OpenAI's grammar-constrained decoding) whenever the
schema can be expressed strictly; when it cannot (a ``dict[str, X]`` field,
say), it is sent non-strict and the validation here is what holds the line,
unless the agent was built with ``strict=True``, which then refuses it.

While the answer streams, ``OutputSpec.partial`` reads the text received so
far with pydantic's partial JSON mode (``experimental_allow_partial=
"trailing-strings"``): an unfinished string counts as far as it goes, digits
at the very end as far as they go (``1`` of ``12``), an unfinished ``1.``,
``-``, ``tru`` or key is left out, and a model validates once every required
field has begun.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

import attrs
import pydantic
import pydantic_core

from juno_bind_trio._errors import SchemaError
from juno_bind_trio.schema import sanitize_tool_schema

from ._tool import validation_message
from ._tool_nulls import drop_absent_nulls

__all__ = ["OutputSpec", "output_spec"]

_FORMAT_NAME: Final = re.compile(r"[^A-Za-z0-9_-]")


@attrs.frozen
class OutputSpec:
    """How a run's final answer is requested and read."""

    text: bool
    response_format: dict[str, Any] | None
    _read: Callable[[str], Any] = attrs.field(alias="read")
    _read_partial: Callable[[str], Any] = attrs.field(alias="read_partial", default=str)
    # The response_format with the output type's whole JSON schema, before the
    # provider dialect moved keywords into descriptions: what an in-process
    # model (testing.TestModel) answers in.
    full_format: dict[str, Any] | None = None

    def read(self, content: str | None) -> Any:
        """The validated output; raises ``pydantic.ValidationError`` or ``ValueError``."""
        if self.text:
            return content or ""
        if content is None:
            raise ValueError("the answer has no content; expected a JSON value")
        return self._read(content)

    def partial(self, content: str, *, complete: bool) -> Any:
        """The output as far as *content*, a prefix of the answer, goes.

        *complete*: the turn is over and *content* is its whole text, which is
        then read exactly as the run reads its answer (so the value equals the
        run's output), and partially only if that fails. Raises
        ``pydantic.ValidationError`` or ``ValueError`` when nothing validates
        yet; for a ``str`` output the text is the value.
        """
        if self.text:
            return content
        if complete:
            try:
                return self._read(content)
            except ValueError:
                pass
        return self._read_partial(content)

    def problem(self, content: str | None) -> str | None:
        """``None`` when *content* is a valid output, else what is wrong with it, for the model."""
        try:
            self.read(content)
        except pydantic.ValidationError as exc:
            return validation_message("the answer", exc).replace(
                "invalid arguments for the answer: ", ""
            )
        except ValueError as exc:
            return str(exc)
        except RecursionError:
            # Deeper than the validator can walk: an answer like any other bad one.
            return "the answer nests too deeply to read; answer with a shallower value"
        return None


def _is_object_schema(schema: dict[str, Any]) -> bool:
    node: Any = schema
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = schema.get("$defs", {}).get(ref[len("#/$defs/") :], {})
    return isinstance(node, dict) and node.get("type") == "object" and "properties" in node


def output_spec(owner: str, output_type: Any, *, strict: bool) -> OutputSpec:
    """Build the spec for *output_type*, refusing what cannot be requested at construction."""
    if output_type is str:
        return OutputSpec(text=True, response_format=None, read=str)
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:  # pydantic's several "cannot build a schema" errors
        raise TypeError(
            f"{owner}: output_type {output_type!r} cannot be expressed as JSON Schema "
            f"({type(exc).__name__}: {exc})"
        ) from None
    wrapped = not _is_object_schema(schema)
    if wrapped:
        wrapper = pydantic.create_model("Output", result=(output_type, ...))
        adapter = pydantic.TypeAdapter(wrapper)
        schema = adapter.json_schema()
    title = schema.get("title")
    name = _FORMAT_NAME.sub("_", title)[:64] if isinstance(title, str) and title else "output"
    try:
        request_schema = sanitize_tool_schema(schema, dialect="openai_strict").schema
        is_strict = True
    except SchemaError as exc:
        if strict:
            raise SchemaError(
                f"{owner}: output_type {output_type!r} cannot be expressed in OpenAI strict "
                f"mode at {exc.pointer or '(root)'}: {exc}",
                exc.pointer,
            ) from None
        request_schema = sanitize_tool_schema(schema, dialect="openai").schema
        is_strict = False
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": request_schema, "strict": is_strict},
    }
    validate_json = adapter.validate_json
    validate_python = adapter.validate_python

    def read(content: str) -> Any:
        try:
            value = validate_json(content.strip())
        except pydantic.ValidationError as first:
            # Strict mode writes null for every optional property left out.
            try:
                parsed = json.loads(content)
            except (ValueError, RecursionError):
                raise first from None  # it already says "invalid JSON", and where
            value = validate_python(drop_absent_nulls(parsed, schema, schema))
        return value.result if wrapped else value

    def read_partial(content: str) -> Any:
        try:
            value = validate_json(content, experimental_allow_partial="trailing-strings")
        except pydantic.ValidationError:
            # Strict mode's nulls for optional properties again, on what parses so far.
            parsed = pydantic_core.from_json(content, allow_partial="trailing-strings")
            value = validate_python(
                drop_absent_nulls(parsed, schema, schema),
                experimental_allow_partial="trailing-strings",
            )
        return value.result if wrapped else value

    full_format = {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": schema, "strict": False},
    }
    return OutputSpec(
        text=False,
        response_format=response_format,
        read=read,
        read_partial=read_partial,
        full_format=full_format,
    )
