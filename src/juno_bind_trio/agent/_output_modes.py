"""Output modes: how a run's final answer is asked for, and what reads it.

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

import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, final

import attrs
import pydantic

from juno_bind_trio._errors import ModelRetry, SchemaError
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers import PROVIDER_STATE_KEY
from juno_bind_trio.run import assistant_message, tool_message
from juno_bind_trio.schema import sanitize_tool_schema

from ._context import RunContext
from ._output import OutputSpec, output_spec
from ._tool import validation_message

if TYPE_CHECKING:
    from juno_bind_trio.loop import ModelTurn

__all__ = [
    "NO_VALUE",
    "NativeOutput",
    "OutputMode",
    "OutputPlan",
    "PromptedOutput",
    "ToolAnswerView",
    "ToolOutput",
    "Verdict",
    "bind_output_tool",
    "check_output_tool_names",
    "is_output_mode",
    "output_plan",
    "output_tool_context",
]

T = TypeVar("T")

DEFAULT_OUTPUT_TOOL: Final = "final_result"
_TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME_PART: Final = re.compile(r"[^A-Za-z0-9_-]")
_DEFAULT_DESCRIPTION: Final = (
    "The final answer: call this with the answer as its arguments once you have it; "
    "the run ends with it."
)


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
        if not _TOOL_NAME.match(given):
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
"""One of the three output modes."""

_PROMPT: Final = (
    "Answer with only a JSON value that matches this JSON schema: no other text, "
    "no explanation.\n{schema}"
)


# --- output functions ------------------------------------------------------------------


@final
class _OutputFunction:
    """An output function: called with the validated value; its return is the run's output."""

    __slots__ = ("function", "name", "takes_context", "value_type")

    def __init__(self, owner: str, function: Callable[..., Any]) -> None:
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            raise TypeError(f"{owner}: output function {function!r} has no signature") from None
        parameters = [
            p
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception as exc:  # an annotation that does not resolve
            raise TypeError(
                f"{owner}: output function {function!r} has annotations that do not resolve "
                f"({type(exc).__name__}: {exc})"
            ) from None
        takes_context = bool(parameters) and _is_run_context(
            hints.get(parameters[0].name, parameters[0].annotation)
        )
        values = parameters[1:] if takes_context else parameters
        if len(values) != 1:
            raise TypeError(
                f"{owner}: output function {_name_of(function)} must take one value "
                "parameter (after an optional RunContext first), the validated output; "
                f"it takes {len(values)}"
            )
        value = values[0]
        if value.name not in hints:
            raise TypeError(
                f"{owner}: output function {_name_of(function)}'s parameter {value.name!r} "
                "needs a type annotation: it is the type the model is asked for"
            )
        self.function: Callable[..., Any] = function
        self.name: str = _name_of(function)
        self.takes_context: bool = takes_context
        self.value_type: Any = hints[value.name]

    async def __call__(self, context: RunContext[Any], value: Any) -> Any:
        result = self.function(context, value) if self.takes_context else self.function(value)
        if inspect.isawaitable(result):
            result = await result
        return result


def _name_of(function: object) -> str:
    return str(getattr(function, "__name__", None) or type(function).__name__)


def _is_run_context(annotation: object) -> bool:
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


def _is_function(value: object) -> bool:
    given: Any = value
    return (
        callable(given)
        and not isinstance(given, type)
        and typing.get_origin(given) is None
        and not _is_typing_form(given)
    )


def _is_typing_form(value: object) -> bool:
    module = getattr(type(value), "__module__", "")
    return module in ("typing", "typing_extensions", "types")


# --- members ---------------------------------------------------------------------------


@final
@attrs.frozen
class _Member:
    """One member of an output type: a type, or a function of one."""

    value_type: Any
    function: _OutputFunction | None
    label: str

    @property
    def is_text(self) -> bool:
        return self.value_type is str and self.function is None


def _members(owner: str, output_type: object) -> list[_Member]:
    if isinstance(output_type, list | tuple):
        given: list[object] = list(output_type)
        if not given:
            raise ValueError(f"{owner}: output_type is an empty list; give at least one type")
    elif isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        given = list(typing.get_args(output_type))
    else:
        given = [output_type]
    members: list[_Member] = []
    for item in given:
        if isinstance(item, ToolOutput | NativeOutput | PromptedOutput):
            raise TypeError(
                f"{owner}: {item!r} inside an output type; wrap the whole list in one mode "
                "instead (ToolOutput([A, B]))"
            )
        if item is None or item is type(None):
            raise TypeError(f"{owner}: output_type cannot have None as a member")
        if _is_function(item):
            function = _OutputFunction(owner, item)  # type: ignore[arg-type]
            members.append(_Member(function.value_type, function, function.name))
        else:
            label = getattr(item, "__name__", None) or _NAME_PART.sub("_", repr(item))
            members.append(_Member(item, None, str(label)))
    return members


def _union_of(members: Sequence[_Member]) -> Any:
    types_ = [m.value_type for m in members]
    if len(types_) == 1:
        return types_[0]
    return typing.Union[tuple(types_)]  # noqa: UP007 - built at run time


# --- verdicts --------------------------------------------------------------------------


@final
class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE: Final = _NoValue()
"""A verdict's value when the turn has no final answer (it called tools, or was rejected)."""


@final
@attrs.frozen
class Verdict:
    """What a turn's answer is worth to the output type.

    *result* is what the turn commits (for tool mode, the final call's
    arguments as the assistant's text); *value* the run's output (``NO_VALUE``
    for a turn that called other tools, or was rejected); *problem* what was
    wrong, for the model, and *reask* the messages that ask again after it.
    """

    result: Any
    value: Any = NO_VALUE
    problem: str | None = None
    reask: tuple[dict[str, Any], ...] = ()


def _bare(result: ModelTurnResult) -> dict[str, Any]:
    """The result's provider fields, without the provider's state (its own replay)."""
    return {k: v for k, v in result.extra.items() if k != PROVIDER_STATE_KEY}


def _reask_text(problem: str) -> str:
    return (
        f"Your answer does not match the required output: {problem}. "
        "Answer again with only the corrected JSON."
    )


def _text_reask(result: ModelTurnResult, problem: str, tail: str | None = None) -> Verdict:
    return Verdict(
        result,
        problem=problem,
        reask=(
            assistant_message(result.content, (), **result.extra),
            {"role": "user", "content": tail or _reask_text(problem)},
        ),
    )


def _problem_of(exc: BaseException) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return validation_message("the answer", exc).replace(
            "invalid arguments for the answer: ", ""
        )
    if isinstance(exc, RecursionError):
        return "the answer nests too deeply to read; answer with a shallower value"
    return str(exc)


# --- the plan --------------------------------------------------------------------------


@final
class _OutputTool:
    __slots__ = ("definition", "member", "name", "spec")

    def __init__(
        self, name: str, member: _Member, spec: OutputSpec, definition: dict[str, Any]
    ) -> None:
        self.name = name
        self.member = member
        self.spec = spec
        self.definition = definition


ModeName = Literal["text", "native", "prompted", "tool"]


@final
class OutputPlan:
    """A run's output type and the mode it is asked for in: what the run hands its turns.

    ``text`` is true for a plain ``str`` output (no re-ask, no reading);
    ``response_format`` is native mode's; ``tool_definitions`` tool mode's
    final-answer tools; ``prompt`` prompted mode's added instructions.
    """

    __slots__ = (
        "_function",
        "_prompt",
        "_spec",
        "_tools",
        "allows_text",
        "full_format",
        "mode",
        "response_format",
        "text",
    )

    def __init__(
        self,
        mode: ModeName,
        *,
        spec: OutputSpec | None = None,
        function: _OutputFunction | None = None,
        tools: Sequence[_OutputTool] = (),
        allows_text: bool = False,
        prompt: str | None = None,
    ) -> None:
        self.mode: ModeName = mode
        self.text: bool = mode == "text" and function is None
        self._spec = spec
        self._function = function
        self._tools: dict[str, _OutputTool] = {t.name: t for t in tools}
        self.allows_text: bool = allows_text
        self._prompt = prompt
        self.response_format: dict[str, Any] | None = (
            spec.response_format if mode == "native" and spec is not None else None
        )
        self.full_format: dict[str, Any] | None = (
            spec.full_format if mode == "native" and spec is not None else None
        )

    def __repr__(self) -> str:
        return f"<OutputPlan {self.mode}>"

    # --- what is asked -------------------------------------------------------------

    @property
    def tool_definitions(self) -> tuple[dict[str, Any], ...]:
        """Tool mode's final-answer tools, in the chat completions tool form."""
        return tuple(t.definition for t in self._tools.values())

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of tool mode's final-answer tools."""
        return frozenset(self._tools)

    @property
    def judged(self) -> bool:
        """Whether a turn's answer must be judged (anything but plain text with no function)."""
        return not self.text

    def shape(self, turn: ModelTurn) -> ModelTurn:
        """*turn* as the mode sends it: prompted mode adds its instructions to the request."""
        prompt = self._prompt
        if prompt is None:
            return turn
        messages = list(turn.messages)
        first = messages[0] if messages else None
        if (
            first is not None
            and first.get("role") == "system"
            and isinstance(first.get("content"), str)
        ):
            messages[0] = {**first, "content": f"{first['content']}\n\n{prompt}"}
        else:
            messages.insert(0, {"role": "system", "content": prompt})
        return turn.with_messages(messages)

    # --- what is read --------------------------------------------------------------

    def read(self, content: str | None) -> Any:
        """The output read from a committed answer's text (no output function applied)."""
        if self.mode == "text":
            return content or ""
        if self.mode == "tool":
            if content is None:
                raise ValueError("the answer has no content")
            for each in self._tools.values():
                try:
                    return each.spec.read(content)
                except (ValueError, RecursionError):
                    continue
            if self.allows_text:
                return content
            raise ValueError("the answer matches none of the output tools")
        spec = self._spec
        assert spec is not None
        return spec.read(_unfenced(content) if self.mode == "prompted" else content)

    def partial(self, content: str, *, complete: bool) -> Any:
        """The output as far as the answer's text *content* goes (see ``OutputSpec.partial``)."""
        if self.mode == "text":
            return content
        if self.mode == "tool":
            if complete:
                return self.read(content)
            if self.allows_text:
                return content
            raise ValueError("tool mode streams its answer as a tool call")
        spec = self._spec
        assert spec is not None
        if self.mode == "prompted":
            content = _unfenced(content, partial=not complete)
        return spec.partial(content, complete=complete)

    def partial_tool(self, name: str, arguments: str) -> Any:
        """Tool mode's output as far as the final-answer call *name*'s *arguments* go."""
        found = self._tools.get(name)
        if found is None:
            raise ValueError(f"{name!r} is not an output tool")
        return found.spec.partial(arguments, complete=False)

    def test_answer(self) -> tuple[str, dict[str, Any]] | None:
        """Tool mode's first output tool and its parameters schema (for an in-process model)."""
        for each in self._tools.values():
            full = each.spec.full_format
            schema = None if full is None else full["json_schema"]["schema"]
            return each.name, dict(schema or {})
        return None

    # --- the judgement -------------------------------------------------------------

    async def judge(
        self, result: ModelTurnResult, context: Callable[[str, str], RunContext[Any]]
    ) -> Verdict:
        """What *result* is worth: its final value, or the problem and the re-ask it is owed.

        *context* makes the output function's RunContext from the call id and
        tool name (empty for a text answer).
        """
        if self.mode == "tool":
            return await self._judge_tool(result, context)
        if result.tool_calls:
            return Verdict(result)  # a tool turn: the loop runs its calls
        if self.mode == "text":
            return await self._finish(result, result.content or "", self._function, context, "")
        try:
            value = self.read(result.content)
        except (ValueError, RecursionError) as exc:  # ValidationError is a ValueError
            return _text_reask(result, _problem_of(exc))
        return await self._finish(result, value, self._function, context, "")

    async def _finish(
        self,
        result: ModelTurnResult,
        value: Any,
        function: _OutputFunction | None,
        context: Callable[[str, str], RunContext[Any]],
        call_id: str,
        tool: str = "",
        reask: Callable[[str], Verdict] | None = None,
    ) -> Verdict:
        if function is not None:
            try:
                value = await function(context(call_id, tool), value)
            except ModelRetry as retry:
                if reask is not None:
                    return reask(retry.message)
                return _text_reask(
                    result,
                    retry.message,
                    f"Your answer was not accepted: {retry.message}. Answer again.",
                )
        return Verdict(result, value)

    async def _judge_tool(
        self, result: ModelTurnResult, context: Callable[[str, str], RunContext[Any]]
    ) -> Verdict:
        calls = result.tool_calls
        final = next((c for c in calls if c.name in self._tools), None)
        if final is None:
            if calls:
                return Verdict(result)
            if self.allows_text:
                return await self._finish(result, result.content or "", None, context, "")
            names = " or ".join(sorted(self._tools))
            problem = f"the answer must be given by calling {names}, not as text"
            return _text_reask(
                result,
                problem,
                f"Do not answer in text: call {names} with your answer as its arguments.",
            )
        tool = self._tools[final.name]
        committed = ModelTurnResult(
            content=final.arguments,
            reasoning=result.reasoning,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cost=result.cost,
            cached_tokens=result.cached_tokens,
            reasoning_tokens=result.reasoning_tokens,
            time_to_first_token=result.time_to_first_token,
            extra=_bare(result),
        )

        def reask(problem: str, *, retry: bool = False) -> Verdict:
            answers = []
            for call in calls:
                if call is final:
                    text = (
                        f"Not accepted: {problem}. Call {final.name} again."
                        if retry
                        else f"Invalid arguments: {problem}. Call {final.name} again with "
                        "corrected arguments."
                    )
                else:
                    text = (
                        f"Not run: this response called {final.name}, which ends the run. "
                        "Call other tools in a response of their own."
                    )
                answers.append(tool_message(call.id, text))
            return Verdict(
                result,
                problem=problem,
                reask=(assistant_message(result.content, calls, **result.extra), *answers),
            )

        try:
            value = tool.spec.read(final.arguments)
        except (ValueError, RecursionError) as exc:
            return reask(_problem_of(exc))
        return await self._finish(
            committed,
            value,
            tool.member.function,
            context,
            final.id,
            final.name,
            lambda message: reask(message, retry=True),
        )


def _unfenced(content: str | None, *, partial: bool = False) -> str:
    """The JSON inside an answer's text: a Markdown code fence, or prose, around it removed."""
    if content is None:
        raise ValueError("the answer has no content; expected a JSON value")
    text = content.strip()
    if text.startswith("```"):
        newline = text.find("\n")
        text = "" if newline < 0 else text[newline + 1 :]
        end = text.rfind("```")
        if end >= 0:
            text = text[:end]
        return text.strip()
    if partial or not text or text[0] in '{["' or text[0].isdigit():
        return text
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return text
    stop = max(text.rfind("}"), text.rfind("]"))
    return text[start : stop + 1] if stop > start else text[start:]


# --- building --------------------------------------------------------------------------


def _tool_definition(
    owner: str, name: str, description: str, spec: OutputSpec, *, strict: bool
) -> dict[str, Any]:
    full = spec.full_format
    assert full is not None
    schema = full["json_schema"]["schema"]
    try:
        parameters = sanitize_tool_schema(schema, dialect="openai_strict").schema
        is_strict = True
    except SchemaError as exc:
        if strict:
            raise SchemaError(
                f"{owner}: output tool {name!r} cannot be expressed in OpenAI strict mode "
                f"at {exc.pointer or '(root)'}: {exc}",
                exc.pointer,
            ) from None
        parameters = sanitize_tool_schema(schema, dialect="openai").schema
        is_strict = False
    function: dict[str, Any] = {
        "name": name,
        "description": description,
        "parameters": parameters,
    }
    if is_strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def output_plan(owner: str, output_type: object, *, strict: bool) -> OutputPlan:
    """The plan for *output_type* (a type, a list or union, a function, or a mode of one)."""
    mode: ModeName
    if isinstance(output_type, ToolOutput):
        mode, inner = "tool", output_type.output_type
    elif isinstance(output_type, NativeOutput):
        mode, inner = "native", output_type.output_type
    elif isinstance(output_type, PromptedOutput):
        mode, inner = "prompted", output_type.output_type
    else:
        mode, inner = "native", output_type
        if inner is str:
            return OutputPlan("text")
    members = _members(owner, inner)
    functions = [m for m in members if m.function is not None]
    if mode != "tool" and len(functions) > 1:
        if isinstance(output_type, NativeOutput | PromptedOutput):
            raise TypeError(
                f"{owner}: {type(output_type).__name__} takes at most one output function; "
                "several need ToolOutput (one tool per function)"
            )
        mode = "tool"  # several functions: only tools can say which one the model chose
    if mode == "tool":
        return _tool_plan(owner, output_type, members, strict=strict)
    function = functions[0].function if functions else None
    if function is not None and len(members) > 1:
        raise TypeError(
            f"{owner}: an output function in a list with other types needs ToolOutput "
            "(one tool per member)"
        )
    value_type = _union_of(members)
    if value_type is str:
        if mode == "prompted":
            raise TypeError(f"{owner}: PromptedOutput(str) asks for nothing; use output_type=str")
        return OutputPlan("text", function=function)
    spec = output_spec(owner, value_type, strict=strict)
    if mode == "prompted":
        assert spec.full_format is not None
        schema = json.dumps(spec.full_format["json_schema"]["schema"], separators=(",", ":"))
        template = output_type.template if isinstance(output_type, PromptedOutput) else None
        prompt = (template or _PROMPT).replace("{schema}", schema)
        return OutputPlan("prompted", spec=spec, function=function, prompt=prompt)
    return OutputPlan("native", spec=spec, function=function)


def _tool_plan(
    owner: str, given: object, members: Sequence[_Member], *, strict: bool
) -> OutputPlan:
    base = given.name if isinstance(given, ToolOutput) else DEFAULT_OUTPUT_TOOL
    description = given.description if isinstance(given, ToolOutput) else None
    typed = [m for m in members if not m.is_text]
    texts = tuple(m for m in members if m.is_text)
    if not typed:
        raise TypeError(f"{owner}: ToolOutput(str) asks for no tool; use output_type=str")
    tools: list[_OutputTool] = []
    for member in typed:
        name = base if len(typed) == 1 else f"{base}_{_NAME_PART.sub('_', member.label)}"[:64]
        if any(t.name == name for t in tools):
            raise ValueError(f"{owner}: two output tools would be named {name!r}")
        spec = output_spec(owner, member.value_type, strict=strict)
        words = description or _DEFAULT_DESCRIPTION
        if len(typed) > 1:
            words = f"{words} (the answer as a {member.label})"
        tools.append(
            _OutputTool(
                name, member, spec, _tool_definition(owner, name, words, spec, strict=strict)
            )
        )
    return OutputPlan("tool", tools=tools, allows_text=bool(texts))


def check_output_tool_names(owner: str, plan: OutputPlan, tool_names: Sequence[str]) -> None:
    """A tool of the agent's named like an output tool is refused at construction."""
    for name in tool_names:
        if name in plan.tool_names:
            raise ValueError(
                f"{owner}: the tool {name!r} has the name of the output tool; rename one "
                "(tool(fn, name=...) or ToolOutput(..., name=...))"
            )


def output_tool_context(
    deps: object, run_id: str, iteration: int, chain: Any, children: Any
) -> Callable[[str, str], RunContext[Any]]:
    """The RunContext factory an output function is called with."""

    def make(call_id: str, tool: str) -> RunContext[Any]:
        return RunContext(
            deps=deps,
            run_id=run_id,
            tool_call_id=call_id,
            tool_name=tool,
            iteration=iteration,
            chain=chain,
            children=children,
        )

    return make


def is_output_mode(value: object) -> bool:
    """Whether *value* is one of the three output modes."""
    return isinstance(value, ToolOutput | NativeOutput | PromptedOutput)


def bind_output_tool(model: Any, plan: OutputPlan) -> Any:
    """An in-process model (``testing.TestModel``) told tool mode's final-answer tool."""
    bind = getattr(model, "with_output_tool", None)
    answer = plan.test_answer()
    if answer is None or not callable(bind) or isinstance(model, str):
        return model
    return bind(*answer)


@final
class ToolAnswerView:
    """Tool mode's answer as it streams: the final-answer call's arguments so far."""

    __slots__ = ("_calls", "_names", "epoch", "turn_id")

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names
        self._calls: dict[int, list[str]] = {}
        self.turn_id: str | None = None
        self.epoch: int = 0

    def apply(self, turn_id: str, index: int, name: str | None, delta: str) -> None:
        """One tool-call fragment of turn *turn_id*."""
        if turn_id != self.turn_id:
            self.reset(turn_id)
        entry = self._calls.setdefault(index, ["", ""])
        if name:
            entry[0] = name
        entry[1] += delta

    def reset(self, turn_id: str | None) -> None:
        """A new turn, or a new attempt of it: nothing streamed yet."""
        self.turn_id = turn_id
        self._calls = {}
        self.epoch += 1

    def current(self) -> tuple[str, str] | None:
        """The first final-answer call's name and arguments so far, if one is streaming."""
        for name, arguments in self._calls.values():
            if name in self._names:
                return name, arguments
        return None
