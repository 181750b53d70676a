"""The output modes a host chooses from: how a run's final answer is asked for.

Three ways to ask a model for a typed answer, and one plan that holds the
choice for a run:

* [NativeOutput][juno_bind_trio.agent.NativeOutput]: the provider's own
  structured output (``response_format`` on the chat completions API; the
  Anthropic adapter turns it into a tool the model is made to call).
* [ToolOutput][juno_bind_trio.agent.ToolOutput]: a final-answer tool
  (``final_result``) the model calls with the answer as its arguments. Works
  with any provider that has tools, and leaves the model free to call the
  other tools first.
* [PromptedOutput][juno_bind_trio.agent.PromptedOutput]: the JSON schema in
  the instructions, the answer's text parsed. For a server with neither.

A plain type is native. A list of types, or a union, is one output type of
several members: native and prompted ask for their union; tool mode offers
one tool per member (``final_result_Invoice``, ``final_result_Refusal``) and,
when ``str`` is a member, accepts a plain text answer as the ``str``. A
function is an output function: its value parameter's type is asked for,
it is called with the validated value, and what it returns is the run's
output; it may raise [ModelRetry][juno_bind_trio.ModelRetry] to have the
model asked again.

Each mode judges a turn's answer in the turn (``OutputPlan.judge``): the
re-ask that a bad answer is owed is made inside the same turn, so a reader
sees it as a reset and the transcript keeps only the answer that passed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Generic, TypeVar, final

from juno_bind_trio._validate import is_tool_name

__all__ = [
    "DEFAULT_OUTPUT_TOOL",
    "NativeOutput",
    "OutputMode",
    "PromptedOutput",
    "ToolOutput",
]

T = TypeVar("T")

DEFAULT_OUTPUT_TOOL: Final = "final_result"


def _check_description(owner: str, description: object) -> str | None:
    if description is not None and not isinstance(description, str):
        raise TypeError(f"{owner}: description must be a str or None, got {description!r}")
    return description


@final
class ToolOutput(Generic[T]):
    """Ask for the answer through a final-answer tool the model must call.

    ``Agent(model, output_type=ToolOutput(Invoice))``: the model is offered,
    beside the agent's tools, a tool named *name* (``"final_result"``) whose
    parameters are *output_type*'s schema; its call's arguments, validated,
    are the run's output, and the run ends with it (other calls made in that
    same response are not run). An answer in plain text, or arguments that
    do not validate, are re-asked within the turn. Works with any provider
    that has tools, a server without ``response_format`` included.

    *output_type* may be a list of types or a union: one tool per member,
    named ``<name>_<Member>``; ``str`` among them lets the model answer in
    plain text instead. An output function (or several) may stand in for a
    type. *description* is the tool's description for the model.

    :raises TypeError: *description* is not a str. :raises ValueError:
        *name* is not 1-64 letters, digits, ``_`` or ``-``.
    """

    __slots__ = ("description", "name", "output_type")

    def __init__(
        self,
        output_type: type[T] | Callable[..., T] | Callable[..., Awaitable[T]] | Sequence[Any] | Any,
        *,
        name: str = DEFAULT_OUTPUT_TOOL,
        description: str | None = None,
    ) -> None:
        owner = "ToolOutput"
        given: object = name
        if not isinstance(given, str):
            raise TypeError(f"{owner}: name must be a str, got {name!r}")
        if not is_tool_name(given):
            raise ValueError(
                f"{owner}: name must be 1-64 letters, digits, '_' or '-' (a tool name), "
                f"got {name!r}"
            )
        self.output_type: Any = output_type
        self.name: str = name
        self.description: str | None = _check_description(owner, description)

    def __repr__(self) -> str:
        return f"ToolOutput({self.output_type!r}, name={self.name!r})"


@final
class NativeOutput(Generic[T]):
    """Ask for the answer through the provider's own structured output.

    ``response_format`` with the type's JSON schema (strict when the schema
    can be) on the chat completions API; the Anthropic adapter makes it a
    tool the model is forced to call. The answer's text is validated and
    re-asked within the turn when it does not. A plain ``output_type`` is
    this mode.
    """

    __slots__ = ("output_type",)

    def __init__(
        self,
        output_type: type[T] | Callable[..., T] | Callable[..., Awaitable[T]] | Sequence[Any] | Any,
    ) -> None:
        self.output_type: Any = output_type

    def __repr__(self) -> str:
        return f"NativeOutput({self.output_type!r})"


@final
class PromptedOutput(Generic[T]):
    """Ask for the answer by putting its JSON schema in the instructions.

    For a server that has neither ``response_format`` nor tools: the
    request's system message gets the schema and the rule "answer with only
    the JSON", the answer's text is parsed (a Markdown code fence around it
    is allowed) and validated, and re-asked within the turn when it fails.
    The transcript's own system message is left as the agent wrote it.
    *template* words the added instructions; ``{schema}`` in it is replaced
    by the schema.

    :raises TypeError: *template* is not a str.
    """

    __slots__ = ("output_type", "template")

    def __init__(
        self,
        output_type: type[T] | Callable[..., T] | Callable[..., Awaitable[T]] | Sequence[Any] | Any,
        *,
        template: str | None = None,
    ) -> None:
        given: object = template
        if given is not None and not isinstance(given, str):
            raise TypeError(f"PromptedOutput: template must be a str or None, got {template!r}")
        self.output_type: Any = output_type
        self.template: str | None = template

    def __repr__(self) -> str:
        return f"PromptedOutput({self.output_type!r})"


OutputMode = ToolOutput[Any] | NativeOutput[Any] | PromptedOutput[Any]
