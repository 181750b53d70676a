"""Completions that arrived but cannot be used, and structured output that does not parse.

A completion can fail without any exception. The stream ends, the SDK is
satisfied, and what was assembled is still unusable: nothing in it, cut off
by the token limit, cut off by the connection (the openai SDK raises nothing
when a body ends cleanly without ``[DONE]``; the only trace is a missing
finish reason), withheld by a content filter, or carrying tool calls that
cannot be dispatched.
[`detect_completion_defect()`][juno_bind_trio.completion.detect_completion_defect] names the first
of those it finds, root cause first, so the attempt function can turn it into a
[`CompletionDefectError`][juno_bind_trio.CompletionDefectError] and let routing retry the same
endpoint within
[`DEFAULT_COMPLETION_DEFECT_MAX_RETRIES`][juno_bind_trio.completion.DEFAULT_COMPLETION_DEFECT_MAX_RETRIES].

Structured output is a separate question asked *after* routing succeeded:
the completion is fine as a completion, but the host asked for JSON and got
something else. That retry runs in the caller's own loop, outside the route
executor (see [`retry_structured_output()`][juno_bind_trio.completion.retry_structured_output]).

"Parses" here means parses.
[`structured_output_parses()`][juno_bind_trio.completion.structured_output_parses] checks that the
text is standard JSON and that its top-level value has the type the schema's root asks for; it does
not validate against the schema, which would need a JSON Schema implementation this package does not
carry. Validate with your own model class after it returns true.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias

import attrs

from juno_bind_trio._calls import ToolCall
from juno_bind_trio._errors import CompletionDefectError, ToolCallArgumentsError

from ._assembly import AssembledToolCall
from ._tool_calls import decode_strict_json, parse_tool_call_arguments

__all__ = [
    "DEFAULT_COMPLETION_DEFECT_MAX_RETRIES",
    "DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES",
    "AssembledCompletion",
    "CompletionDefect",
    "CompletionDefectKind",
    "CompletionOutputs",
    "ResponseFormatShape",
    "StreamedToolCall",
    "detect_completion_defect",
    "expects_json_output",
    "json_parses",
    "structured_output_parses",
]

DEFAULT_COMPLETION_DEFECT_MAX_RETRIES: Final = 2
"""Retries of the *same* endpoint for a defective completion, before routing moves on.

Two, the figure the TypeScript README works through ("a plan with three
stages, three candidates and two defect retries"). A defect is usually a
sampling accident that a second draw does not repeat; one that survives
three draws is the endpoint's, and the next candidate is a better bet.
"""

DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES: Final = 2
"""Re-asks after output that does not parse as the requested JSON: three completions in all.

Each re-ask is a whole routed turn (and, on a live surface, a visible reset),
so the budget is small; a model that fails three times running will not be
talked round by a fourth.
"""

CompletionDefectKind: TypeAlias = Literal[
    "no_finish_reason",
    "content_filtered",
    "truncated",
    "empty",
    "incomplete_tool_call",
    "unparseable_tool_arguments",
]
"""What [`detect_completion_defect()`][juno_bind_trio.completion.detect_completion_defect] can
report, in the order it checks."""

StreamedToolCall: TypeAlias = AssembledToolCall | Mapping[str, Any]
"""A tool call as the defect check reads it.

A [`ToolCall`][juno_bind_trio.run.ToolCall] (from
[`ToolCallAccumulator.tool_calls()`][juno_bind_trio.completion.ToolCallAccumulator.tool_calls]:
its arguments are then parsed once, for the check and every later reader), an
[`AssembledToolCall`][juno_bind_trio.completion.AssembledToolCall] (straight from
[`ToolCallAccumulator.assembled()`][juno_bind_trio.completion.ToolCallAccumulator.assembled],
complete or not), or a chat-format mapping ``{"id", "type", "function": {"name", "arguments"}}``. An
object with ``id`` and ``function.name`` / ``function.arguments`` attributes (the openai
SDK's message tool call) is read the same way.
"""

ResponseFormatShape: TypeAlias = Mapping[str, Any] | type | None
"""A request's ``response_format``.

``None`` or ``{"type": "text"}`` asks for prose; ``{"type": "json_object"}``
and ``{"type": "json_schema", "json_schema": {"schema": {...}}}`` ask for JSON.
A class (a pydantic model handed to the openai SDK's ``parse()`` helpers)
asks for a JSON object.
"""


class CompletionOutputs(Protocol):
    """What a structured-output check reads: the assistant text and its tool calls.

    [`AssembledCompletion`][juno_bind_trio.completion.AssembledCompletion] has it, and so does
    [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult]. An optional ``refusal``
    attribute is read when present.
    """

    @property
    def content(self) -> str | None: ...

    @property
    def tool_calls(self) -> Sequence[Any]: ...


def _optional_str(owner: str, field: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{owner}: {field} must be a str or None, got {value!r}")


def _content(value: str | None) -> str | None:
    return _optional_str("AssembledCompletion", "content", value)


def _finish_reason(value: str | None) -> str | None:
    return _optional_str("AssembledCompletion", "finish_reason", value)


def _refusal(value: str | None) -> str | None:
    return _optional_str("AssembledCompletion", "refusal", value)


def _tool_call_tuple(given: Sequence[StreamedToolCall] | None) -> tuple[StreamedToolCall, ...]:
    value: object = given  # checked at run time, whatever the type says
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(
            f"AssembledCompletion: tool_calls must be a sequence of tool calls, got {value!r}"
        )
    return tuple(value)


@attrs.frozen(kw_only=True)
class AssembledCompletion:
    """Everything one streamed completion produced, for
    [`detect_completion_defect()`][juno_bind_trio.completion.detect_completion_defect].

    ``finish_reason`` is required, and ``None`` is a meaningful value (the
    stream ended without one), so a caller cannot forget to pass it and have
    every truncated stream pass the check.
    """

    content: str | None = attrs.field(default=None, converter=_content)
    tool_calls: tuple[StreamedToolCall, ...] = attrs.field(default=(), converter=_tool_call_tuple)
    finish_reason: str | None = attrs.field(converter=_finish_reason)
    refusal: str | None = attrs.field(default=None, converter=_refusal)


@attrs.frozen
class CompletionDefect:
    """A defect found by
    [`detect_completion_defect()`][juno_bind_trio.completion.detect_completion_defect]: its kind and
    what was seen."""

    kind: CompletionDefectKind
    detail: str

    def as_error(self) -> CompletionDefectError:
        """The exception to raise (or to put on an attempt failure) for this defect."""
        return CompletionDefectError(self.kind, self.detail)


def _read_call(call: object) -> tuple[object, object, object]:
    if type(call) is ToolCall:
        return call.id, call.name, call.arguments
    if isinstance(call, AssembledToolCall):
        return call.id, call.name, call.arguments
    if isinstance(call, Mapping):
        function = call.get("function")
        if isinstance(function, Mapping):
            return call.get("id"), function.get("name"), function.get("arguments")
        return call.get("id"), getattr(function, "name", None), getattr(function, "arguments", None)
    function = getattr(call, "function", None)
    return (
        getattr(call, "id", None),
        getattr(function, "name", None),
        getattr(function, "arguments", None),
    )


def detect_completion_defect(completion: AssembledCompletion) -> CompletionDefect | None:
    """The first defect of *completion*, root cause first, or ``None`` if it is usable.

    In the order checked:

    * ``"no_finish_reason"``: the stream ended without a finish reason, so it
      was cut off whatever else it holds (checked first: a cut-off stream is
      often also empty or has half a tool call, and the cut is the cause);
    * ``"content_filtered"``: ``finish_reason == "content_filter"``;
    * ``"truncated"``: ``finish_reason == "length"``, cut off by the token limit;
    * ``"empty"``: no content (``None`` or only whitespace), no refusal and no
      tool calls;
    * ``"incomplete_tool_call"``: a tool call without an id or a name;
    * ``"unparseable_tool_arguments"``: a tool call whose arguments
      [`parse_tool_call_arguments()`][juno_bind_trio.completion.parse_tool_call_arguments] refuses.

    Any other finish reason (``"stop"``, ``"tool_calls"``, a provider's own)
    is fine. A refusal is an answer, not a defect.
    """
    if not isinstance(completion, AssembledCompletion):
        raise TypeError(
            f"detect_completion_defect: expected an AssembledCompletion, got {completion!r}"
        )
    reason = completion.finish_reason
    if reason is None:
        return CompletionDefect(
            "no_finish_reason",
            "the stream ended without a finish reason: it was cut off before the end",
        )
    if reason == "content_filter":
        return CompletionDefect(
            "content_filtered", "the provider's content filter withheld the completion"
        )
    if reason == "length":
        return CompletionDefect("truncated", "the completion was cut off by the output token limit")
    content = completion.content
    if (
        (content is None or content.strip() == "")
        and not completion.refusal
        and not completion.tool_calls
    ):
        shown = "no content" if content is None else f"only whitespace content {content!r}"
        return CompletionDefect("empty", f"{shown} and no tool calls (finish reason {reason!r})")
    for position, call in enumerate(completion.tool_calls):
        call_id, name, arguments = _read_call(call)
        if not call_id or not name:
            return CompletionDefect(
                "incomplete_tool_call",
                f"tool call {position} has no {'id' if not call_id else 'name'} "
                f"(id={call_id!r}, name={name!r})",
            )
        if arguments is not None and not isinstance(arguments, str):
            return CompletionDefect(
                "unparseable_tool_arguments",
                f"tool call {position} ({name}) has non-string arguments {arguments!r}",
            )
        try:
            if type(call) is ToolCall:
                # Parsed here once, for every later reader of the same call.
                call.parsed  # noqa: B018 - read for the refusal it raises
            else:
                parse_tool_call_arguments(arguments)
        except ToolCallArgumentsError as exc:
            return CompletionDefect(
                "unparseable_tool_arguments", f"tool call {position} ({name}): {exc.detail}"
            )
    return None


# -- structured output -----------------------------------------------------------


_JSON_FORMATS: Final = frozenset({"json_object", "json_schema"})


def _format_type(function: str, response_format: object) -> str | None:
    """The ``type`` of a response format; ``"class"`` for a model class; ``None`` for none."""
    if response_format is None:
        return None
    if isinstance(response_format, type):
        return "class"
    if not isinstance(response_format, Mapping):
        raise TypeError(
            f"{function}: response_format must be a mapping, a class or None, "
            f"got {response_format!r}"
        )
    kind = response_format.get("type")
    if not isinstance(kind, str):
        raise ValueError(  # noqa: TRY004 - the dict is right; its content is not
            f"{function}: response_format must have a string 'type', got {dict(response_format)!r}"
        )
    return kind


def expects_json_output(response_format: ResponseFormatShape) -> bool:
    """Whether a request with this ``response_format`` asks for JSON.

    True for ``{"type": "json_object"}``, ``{"type": "json_schema", ...}`` and
    a model class; false for ``None``, ``{"type": "text"}`` and any other type
    (a provider's grammar or regex formats are not JSON).
    """
    kind = _format_type("expects_json_output", response_format)
    return kind == "class" or kind in _JSON_FORMATS


def json_parses(text: str | None) -> bool:
    """Whether *text* is one standard JSON value (surrounding whitespace allowed).

    ``None`` and blank text do not parse; neither do ``NaN`` / ``Infinity``,
    which Python's `json` would accept but no other party on the wire
    does. Nothing is evaluated.
    """
    if text is None:
        return False
    if not isinstance(text, str):
        raise TypeError(f"json_parses: text must be a str or None, got {text!r}")
    try:
        decode_strict_json(text.strip())
    except (ValueError, RecursionError):
        return False
    return True


_SCHEMA_TYPES: Final[Mapping[str, Any]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
    ),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _root_types(response_format: ResponseFormatShape, kind: str | None) -> list[str] | None:
    """The JSON types the top-level value may have, or ``None`` for any."""
    if kind in ("json_object", "class"):
        return ["object"]
    assert isinstance(response_format, Mapping)
    json_schema = response_format.get("json_schema")
    schema = json_schema.get("schema") if isinstance(json_schema, Mapping) else None
    declared = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(declared, str) and declared in _SCHEMA_TYPES:
        return [declared]
    if isinstance(declared, list) and declared and all(t in _SCHEMA_TYPES for t in declared):
        return list(declared)
    return None


def structured_output_parses(
    outputs: CompletionOutputs, response_format: ResponseFormatShape
) -> bool:
    """Whether *outputs* satisfy the JSON a request's ``response_format`` asked for.

    Always true when the format does not ask for JSON
    ([`expects_json_output()`][juno_bind_trio.completion.expects_json_output]), and for a turn that
    called tools or refused: structured output is the shape of the *final answer*, and
    neither of those is one. Otherwise the content must be standard JSON whose
    top-level value has the type required: an object for ``json_object`` and
    for a model class, and for ``json_schema`` whatever the schema's root
    ``type`` says (anything, if it says nothing). Markdown fences around the
    JSON fail the check, as they would fail the host's own parser.
    """
    kind = _format_type("structured_output_parses", response_format)
    if not (kind == "class" or kind in _JSON_FORMATS):
        return True
    if outputs.tool_calls or getattr(outputs, "refusal", None):
        return True
    content = outputs.content
    if content is None:
        return False
    if not isinstance(content, str):
        raise TypeError(
            f"structured_output_parses: outputs.content must be a str or None, got {content!r}"
        )
    try:
        value = decode_strict_json(content.strip())
    except (ValueError, RecursionError):
        return False
    allowed = _root_types(response_format, kind)
    return allowed is None or any(_SCHEMA_TYPES[t](value) for t in allowed)
