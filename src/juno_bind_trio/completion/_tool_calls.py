"""Reading a tool call's raw arguments: the package's one rule, as two functions.

The rule itself (what ``None``, blank text, ``"null"``, ``"{}"``, a bare
array or ``NaN`` each mean) is the one
[`ToolCall.parsed`][juno_bind_trio.run.ToolCall.parsed] applies, so the loop,
the defect check, the receipt keys, the agent's validation and a host's own
dispatcher agree on what a call asked for:

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

Why these answers is written once, beside the rule, in the package's
tool-call module (``juno_bind_trio/_calls.py``).
"""

from __future__ import annotations

from juno_bind_trio._calls import ToolCallArguments, arguments_absent, parse_arguments
from juno_bind_trio._json import decode_strict_json

__all__ = [
    "ToolCallArguments",
    "decode_strict_json",
    "parse_tool_call_arguments",
    "tool_call_arguments_absent",
]


def tool_call_arguments_absent(raw: str | None) -> bool:
    """Whether a tool call carried no arguments at all: ``None``, blank, or ``"null"``.

    ``"{}"`` is *not* absent: the model sent an empty object on purpose.
    """
    return arguments_absent("tool_call_arguments_absent", raw)


def parse_tool_call_arguments(raw: str | None) -> ToolCallArguments:
    """Parse a tool call's raw arguments into a fresh ``dict``; see the table in this module.

    The rule [`ToolCall.parsed`][juno_bind_trio.run.ToolCall.parsed] applies.
    Returns ``{}`` for absent arguments
    ([`tool_call_arguments_absent()`][juno_bind_trio.completion.tool_call_arguments_absent]). Raises
    [`ToolCallArgumentsError`][juno_bind_trio.ToolCallArgumentsError] for text that is not a JSON
    object, and ``TypeError`` for a value that is not a string.
    """
    return parse_arguments("parse_tool_call_arguments", raw)
