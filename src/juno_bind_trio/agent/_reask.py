"""The structured-output re-ask: a turn's answer checked against the output type, asked again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._cancel import checkpoint_if_cancelled
from juno_bind_trio._errors import StructuredOutputError
from juno_bind_trio.completion import retry_structured_output
from juno_bind_trio.loop import ModelTurn, ModelTurnResult, RunStats

from ._limits import UsageMeter

if TYPE_CHECKING:
    from juno_bind_trio.run import StopSignal

    from ._output import OutputSpec
    from ._session import ModelPort

__all__ = ["Extra", "reask_message", "structured_turn"]


@final
class _Checked:
    """A model turn's result as the structured-output retry reads it.

    ``content`` is the real text when the output validated (or the turn
    called tools); ``None`` when it did not, which is what makes
    ``retry_structured_output`` re-ask for output that parses as JSON but
    fails the output type's validation.
    """

    __slots__ = ("content", "problem", "result", "tool_calls")

    def __init__(self, result: object, problem: str | None) -> None:
        # Not a ModelTurnResult: the host's model is miswired, and the loop refuses it.
        self.result: ModelTurnResult = result  # type: ignore[assignment]
        self.problem: str | None = problem
        self.tool_calls: Sequence[Any] = getattr(result, "tool_calls", ())
        self.content: str | None = getattr(result, "content", None) if problem is None else None


class _ReaskRefused(Exception):
    """A re-ask the run may not make; carries the answer that did not match."""

    def __init__(self, checked: _Checked) -> None:
        super().__init__("re-ask refused")
        self.checked = checked


@final
class Extra:
    """Requests and usage of a run the loop does not see: re-asks inside its turns."""

    __slots__ = (
        "cached_tokens",
        "cost",
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "requests",
    )

    def __init__(self) -> None:
        self.requests: int = 0
        self.input_tokens: int = 0
        self.output_tokens: int = 0
        self.cached_tokens: int = 0
        self.reasoning_tokens: int = 0
        self.cost: float = 0.0

    def spend(self, result: ModelTurnResult, meter: UsageMeter | None, *, sign: int = 1) -> None:
        """Count (or, *sign* -1, uncount) a replaced answer's usage, here and on *meter*."""
        self.input_tokens += sign * result.input_tokens
        self.output_tokens += sign * result.output_tokens
        self.cached_tokens += sign * result.cached_tokens
        self.reasoning_tokens += sign * result.reasoning_tokens
        self.cost += sign * result.cost
        if meter is not None:
            meter.input_tokens += sign * result.input_tokens
            meter.output_tokens += sign * result.output_tokens

    def added_to(self, stats: RunStats) -> RunStats:
        """*stats* (the loop's) with these requests and this usage added."""
        if not (self.requests or self.input_tokens or self.output_tokens or self.cost):
            return stats
        return attrs.evolve(
            stats,
            model_calls=stats.model_calls + self.requests,
            input_tokens=stats.input_tokens + self.input_tokens,
            output_tokens=stats.output_tokens + self.output_tokens,
            cached_tokens=stats.cached_tokens + self.cached_tokens,
            reasoning_tokens=stats.reasoning_tokens + self.reasoning_tokens,
            cost=stats.cost + self.cost,
        )


def reask_message(problem: str) -> str:
    """What the model is told when its answer did not match the output type."""
    return (
        f"Your answer does not match the required output: {problem}. "
        "Answer again with only the corrected JSON."
    )


async def structured_turn(
    model: ModelPort,
    turn: ModelTurn,
    output: OutputSpec,
    *,
    extra: Extra,
    meter: UsageMeter | None,
    stop: StopSignal,
    max_retries: int,
) -> tuple[ModelTurnResult, str | None]:
    """One model turn whose answer must match *output*, and the re-ask it is owed, if any.

    Re-asked until the answer matches, or the retries run out
    (``StructuredOutputError``), or a re-ask may not be made (a soft *stop*, a
    usage limit on *meter*): then the answer stays the turn's, and the problem
    the re-ask would have named comes back with it, for the run's record.
    Requests and usage the loop does not see are counted on *extra*.
    """
    last: list[_Checked] = []

    def may_reask() -> bool:
        # A re-ask is a request like any other: never after a soft stop, never past a limit.
        return not stop.cancel_called and (meter is None or meter.may_request())

    async def produce(rejected: _Checked | None) -> _Checked:
        asked = turn
        if rejected is not None:
            assert rejected.problem is not None
            # The rejected answer's usage counts from now: the re-ask is
            # checked against it, and the loop never sees that answer.
            extra.spend(rejected.result, meter)
            if not may_reask():
                extra.spend(rejected.result, meter, sign=-1)  # the turn's result after all
                raise _ReaskRefused(rejected)
            # No request is made under a pending cancel, a re-ask no more than
            # a turn: the model function would start its work before its
            # first await saw the cancellation.
            await checkpoint_if_cancelled()
            extra.requests += 1
            if meter is not None:
                meter.requests += 1
            _tracing.run_event("juno.output.retry", {"juno.output.problem": rejected.problem[:500]})
            # Only the answer that validates enters the transcript.
            asked = turn.with_extra_messages(
                [
                    {"role": "assistant", "content": rejected.result.content},
                    {"role": "user", "content": reask_message(rejected.problem)},
                ]
            )
        result: object = await model(asked)
        if not isinstance(result, ModelTurnResult) or result.tool_calls:
            checked = _Checked.__new__(_Checked)
            checked.result = result  # type: ignore[assignment]  # the loop refuses it
            checked.problem = None
            checked.tool_calls = getattr(result, "tool_calls", ())
            checked.content = getattr(result, "content", None)
        else:
            checked = _Checked(result, output.problem(result.content))
        last.append(checked)
        return checked

    try:
        checked = await retry_structured_output(
            produce,
            response_format=output.response_format,
            stream=turn.text_stream,
            max_retries=max_retries,
        )
    except _ReaskRefused as refused:
        # The run ends without the re-ask; the answer stays the turn's, and
        # the re-ask goes on record (see turn_would_end).
        return refused.checked.result, refused.checked.problem
    except StructuredOutputError as exc:
        final = last[-1]
        raise StructuredOutputError(
            f"no answer matched the output type in {exc.attempts} attempts; the last: "
            f"{final.problem}",
            exc.attempts,
            final.result.content,
        ) from None
    return checked.result, None
