"""What reads a run's final answer: the OutputPlan that asks for it and judges each turn's.

Each mode judges a turn's answer in the turn (``OutputPlan.judge``): the
re-ask that a bad answer is owed is made inside the same turn, so a reader
sees it as a reset and the transcript keeps only the answer that passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, final

import attrs
import pydantic

from juno_bind_trio._errors import ModelRetry
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers import PROVIDER_STATE_KEY
from juno_bind_trio.run import assistant_message, tool_message

from ._context import RunContext
from ._output import OutputSpec
from ._output_members import Member, OutputFunction
from ._tool import validation_message

if TYPE_CHECKING:
    from juno_bind_trio.loop import ModelTurn

__all__ = [
    "NO_VALUE",
    "ModeName",
    "OutputPlan",
    "OutputTool",
    "ToolAnswerView",
    "Verdict",
    "output_tool_context",
]


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


@final
class OutputTool:
    __slots__ = ("definition", "member", "name", "spec")

    def __init__(
        self, name: str, member: Member, spec: OutputSpec, definition: dict[str, Any]
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
        function: OutputFunction | None = None,
        tools: Sequence[OutputTool] = (),
        allows_text: bool = False,
        prompt: str | None = None,
    ) -> None:
        self.mode: ModeName = mode
        self.text: bool = mode == "text" and function is None
        self._spec = spec
        self._function = function
        self._tools: dict[str, OutputTool] = {t.name: t for t in tools}
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
        function: OutputFunction | None,
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
