"""The structured-output re-ask: a turn's answer checked against the output type, asked again."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._cancel import checkpoint_if_cancelled
from juno_bind_trio._errors import StructuredOutputError
from juno_bind_trio.loop import ModelTurn, ModelTurnResult, RunStats

from ._limits import UsageMeter
from ._output_plan import NO_VALUE, output_tool_context

if TYPE_CHECKING:
    from juno_bind_trio.run import StopSignal

    from ._context import RunContext
    from ._output_plan import OutputPlan, Verdict
    from ._run import _RunCore
    from ._session import ModelPort

__all__ = ["Extra", "answer_of", "reask_message", "structured_turn"]


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
    output: OutputPlan,
    *,
    extra: Extra,
    meter: UsageMeter | None,
    stop: StopSignal,
    max_retries: int,
    context: Callable[[str, str], RunContext[Any]],
) -> tuple[ModelTurnResult, str | None, Any]:
    """One model turn whose answer must match *output*, the re-ask it is owed, and its value.

    Re-asked until the answer matches, or the retries run out
    (``StructuredOutputError``), or a re-ask may not be made (a soft *stop*, a
    usage limit on *meter*): then the answer stays the turn's, and the problem
    the re-ask would have named comes back with it, for the run's record.
    Each re-ask opens a new attempt on the turn's text stream (reason
    ``"structured_output_retry"``), so a reader sees the rejected answer
    withdrawn. Requests and usage the loop does not see are counted on
    *extra*. The value is the run's output when the turn answered
    (``NO_VALUE`` when it called tools, or was not accepted).
    """
    base = output.shape(turn)
    stream = turn.text_stream
    retries = max_retries
    verdict: Verdict | None = None
    attempts = 0
    while True:
        asked = base
        if verdict is not None:
            problem = verdict.problem
            assert problem is not None
            rejected: ModelTurnResult = verdict.result
            if attempts > retries:
                raise StructuredOutputError(
                    f"no answer matched the output type in {attempts} attempts; the last: "
                    f"{problem}",
                    attempts,
                    rejected.content,
                )
            # The rejected answer's usage counts from now: the re-ask is
            # checked against it, and the loop never sees that answer.
            extra.spend(rejected, meter)
            # A re-ask is a request like any other: never after a soft stop, never past a limit.
            if stop.cancel_called or (meter is not None and not meter.may_request()):
                extra.spend(rejected, meter, sign=-1)  # the turn's result after all
                return rejected, problem, NO_VALUE
            # No request is made under a pending cancel, a re-ask no more than
            # a turn: the model function would start its work before its
            # first await saw the cancellation.
            await checkpoint_if_cancelled()
            extra.requests += 1
            if meter is not None:
                meter.requests += 1
            _tracing.run_event("juno.output.retry", {"juno.output.problem": problem[:500]})
            if stream is not None:
                stream.begin_attempt("structured_output_retry")
            # Only the answer that is accepted enters the transcript.
            asked = base.with_messages([*base.messages, *verdict.reask])
        result: object = await model(asked)
        attempts += 1
        if not isinstance(result, ModelTurnResult):
            return result, None, NO_VALUE  # type: ignore[return-value]  # the loop refuses it
        verdict = await output.judge(result, context)
        if verdict.problem is None:
            return verdict.result, None, verdict.value


async def answer_of(core: _RunCore[Any], turn: ModelTurn) -> ModelTurnResult:
    """*turn*'s answer from the run's model: as it came for text, else re-asked until it
    matches the output type (the re-ask owed and the value go on *core*)."""
    # The agent in charge's model and output type (a handoff's target's, after one).
    model = core.model if core.handover is None else await core.handover.model()
    assert model is not None
    output = core.agent.output
    if output.text:
        return await model(turn)
    result, core.reask_owed, core.output_value = await structured_turn(
        model,
        turn,
        output,
        extra=core.extra,
        meter=core.meter,
        stop=core.stop,
        max_retries=core.agent.max_output_retries,
        context=output_tool_context(
            core.deps, core.run_id, turn.iteration, core.chain, core.children
        ),
    )
    return result
