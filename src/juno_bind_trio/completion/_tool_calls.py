"""Reading a tool call's arguments: one defined answer for every shape a model sends.

The arguments of a tool call are text the model wrote, and models write
everything. Each shape has one answer here, so the loop, the defect check and
a host's own dispatcher agree on what a call asked for:

| `raw` | `parse_tool_call_arguments(raw)` | absent? |
| --- | --- | --- |
| `None` | `{}` | yes |
| `""` or only whitespace | `{}` | yes |
| `"null"` | `{}` | yes |
| `"{}"` | `{}` | no |
| `'{"q": "x"}'` | `{"q": "x"}` | no |
| `"[1, 2]"`, `"42"`, ... | [`ToolCallArgumentsError`][juno_bind_trio.ToolCallArgumentsError] | no |
| malformed, `NaN`, `1e400` | the same error | no |
| nested past 500 levels | the same error | no |

Why these answers:

* **Nothing, empty and ``null`` mean "no arguments".** Servers disagree on how
  to stream a call to a function without parameters: OpenAI sends ``"{}"``,
  others send nothing, an empty string or ``null``. All of them mean the same
  call, so all of them parse to the same empty object. Whether that is
  acceptable is the tool's question (a tool with required parameters rejects
  it as it would reject ``{}``), and
  [`tool_call_arguments_absent()`][juno_bind_trio.completion.tool_call_arguments_absent] lets the
  caller tell "sent nothing" from "sent an empty object" when it matters, for example to spot
  arguments lost to a truncated stream.
* **Anything other than a JSON object is refused.** A tool's parameters are
  an object in every tool-calling API; a bare array, string or number cannot
  be bound to named parameters, and guessing (wrapping it, or unwrapping a
  JSON string that happens to contain an object) would dispatch a call the
  model did not make.
* **Only standard JSON that every party can hold.** ``NaN`` and
  ``Infinity`` are refused although Python's `json` would accept them,
  because no other party on the wire would; so is a number past the largest
  double (``1e400``, which Python reads as ``inf`` and JavaScript as
  ``Infinity``), and nesting deeper than 500 levels (the package's JSON
  depth limit). What parses here can be hashed for a receipt. Nothing is
  ever evaluated: the text only ever reaches `json.loads()`.

The refusal is a [`CompletionDefectError`][juno_bind_trio.CompletionDefectError] of kind
``"unparseable_tool_arguments"``: raised out of an attempt, routing retries
the endpoint; caught by the loop, it becomes a tool result that tells the
model what was wrong.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from typing import Any, Final, NoReturn, TypeAlias

from juno_bind_trio._errors import ToolCallArgumentsError
from juno_bind_trio._validate import MAX_JSON_DEPTH

__all__ = ["ToolCallArguments", "parse_tool_call_arguments", "tool_call_arguments_absent"]

ToolCallArguments: TypeAlias = dict[str, Any]
"""A tool call's parsed arguments: a JSON object, as a fresh ``dict``."""

_PREVIEW: Final = 120


def _reject_constant(token: str) -> NoReturn:
    raise ValueError(f"{token} is not standard JSON")


_PAST: Final = "no party on the wire can hold it as a number"


def _finite_float(token: str) -> float:
    value = float(token)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {token[:40]} is past the largest double ({_PAST})")
    return value


def _double_int(token: str) -> int:
    # int() itself refuses more than 4,300 digits (ValueError); below that, an
    # integer past the largest double is a number no other party can hold.
    value = int(token)
    if len(token) > 308 and not -_MAX_DOUBLE <= value <= _MAX_DOUBLE:
        raise ValueError(f"the number {token[:40]}... is past the largest double ({_PAST})")
    return value


_MAX_DOUBLE: Final = int(sys.float_info.max)

_decode: Final = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_double_int
).decode


def _too_deep(value: object) -> bool:
    # Without recursion: the point is to refuse what recursion cannot take.
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        items = node.values() if isinstance(node, dict) else node
        assert isinstance(items, Iterable)
        stack.extend((item, depth + 1) for item in items if isinstance(item, dict | list))
    return False


def decode_strict_json(text: str) -> Any:
    """``json.loads`` for standard JSON that every party can hold, or ``ValueError``.

    Refused: ``NaN`` and ``Infinity``, a number past the largest double
    (``1e400``, which Python would read as ``inf``), and nesting deeper than
    the package's JSON depth limit. Shared with the structured-output check
    (not exported from the package).
    """
    value = _decode(text)
    # The count is a C-speed bound on the depth: only a text with that many
    # brackets can nest that deep, and only then is the value walked.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _too_deep(value):
        raise ValueError(f"it nests more than {MAX_JSON_DEPTH} levels deep")
    return value


def _preview(raw: str) -> str:
    if len(raw) <= _PREVIEW:
        return repr(raw)
    return f"{raw[:_PREVIEW]!r}... ({len(raw)} characters)"


def _check_raw(function: str, raw: object) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    raise TypeError(f"{function}: arguments must be a str or None, got {raw!r}")


def tool_call_arguments_absent(raw: str | None) -> bool:
    """Whether a tool call carried no arguments at all: ``None``, blank, or ``"null"``.

    ``"{}"`` is *not* absent: the model sent an empty object on purpose.
    """
    text = _check_raw("tool_call_arguments_absent", raw)
    if text is None:
        return True
    stripped = text.strip()
    return stripped == "" or stripped == "null"


def parse_tool_call_arguments(raw: str | None) -> ToolCallArguments:
    """Parse a tool call's raw arguments into a ``dict``; see the table in this module.

    Returns ``{}`` for absent arguments
    ([`tool_call_arguments_absent()`][juno_bind_trio.completion.tool_call_arguments_absent]). Raises
    [`ToolCallArgumentsError`][juno_bind_trio.ToolCallArgumentsError] for text that is not a JSON
    object, and ``TypeError`` for a value that is not a string.
    """
    text = _check_raw("parse_tool_call_arguments", raw)
    if text is None:
        return {}
    stripped = text.strip()
    if stripped == "" or stripped == "null":
        return {}
    try:
        value = decode_strict_json(stripped)
    # ValueError covers malformed JSON (JSONDecodeError), the NaN refusal and
    # integers past Python's digit limit; RecursionError is a pathologically
    # deep document. Both are the model's text being unusable, not our bug.
    except (ValueError, RecursionError) as exc:
        raise ToolCallArgumentsError(
            f"tool-call arguments are not valid JSON ({exc}): {_preview(text)}", text
        ) from None
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"a JSON {_json_type(value)}"
        raise ToolCallArgumentsError(
            f"tool-call arguments must be a JSON object, got {kind}: {_preview(text)}", text
        )
    return value


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "number"
