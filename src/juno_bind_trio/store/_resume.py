"""The resume's answer for each call of the open turn a crash left: reuse, run, or refuse.

What a resume does with each call of the open turn
---------------------------------------------------

A run that stopped between recording its open turn and saving the iteration
(a crash, a SIGKILL, a soft stop, a hard cancel) has calls in every state.
[DurableRun.finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn]
answers each here, by its receipt, through
[decide_tool_call_receipt][juno_bind_trio.run.decide_tool_call_receipt]:

* it finished (``"succeeded"``/``"failed"``): its recorded answer is used,
  and the tool is not run again;
* it never started (no receipt; the loop's ``not_run`` refusals are never
  saved, so they arrive here the same way): it is dispatched now;
* it started and did not finish: a repeatable tool runs again; a
  non-repeatable one is answered ``kind: "interrupted"`` and never re-run
  (with [WORKER_STOPPED_TOOL_CALL_MESSAGE][juno_bind_trio.store.WORKER_STOPPED_TOOL_CALL_MESSAGE]
  when its worker stopped while it ran, receipt ``"started"``; with
  [INTERRUPTED_TOOL_CALL_MESSAGE][juno_bind_trio.INTERRUPTED_TOOL_CALL_MESSAGE]
  when a cancel cut it off, receipt ``"interrupted"``), unless the tool
  honours the call's idempotency key, in which case it is dispatched again
  with the same key and the effect's own service drops the duplicate.

A suspended run's open turn holds, besides, the calls that waited for a
decision: they never started (no receipt), so they come to the *screen*
(the agent's approval gate) before anything dispatches them. The screen
answers a denied, expired or externally answered call itself (no receipt:
nothing ran), holds a call still undecided (action ``"hold"``: the run
suspends again, the turn stays open), and lets an approved one through to
be dispatched with its receipt, as any never-started call is.

The never-started calls run as the loop would have run them: calls
``runs_serially`` picks first, one at a time, in order, then the rest
through the pool at ``per_tool_limit`` calls a tool at once.

A call that may run goes through the tool pool as the loop's calls do (a
serial call in a pool batch of its own), so how it ends under a cancel is
the pool's rule, written once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, final

import attrs
import outcome

from juno_bind_trio._errors import INTERRUPTED_TOOL_CALL_MESSAGE
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.plugins import kind_for_error, tool_error_text, tool_failure_message
from juno_bind_trio.run import (
    EffectResumability,
    ReceiptState,
    ToolBatch,
    ToolCall,
    ToolCallLike,
    decide_tool_call_receipt,
    tool_call_args_hash,
    tool_call_receipt_key,
)

from ._records import ReceiptRecord

__all__ = ["WORKER_STOPPED_TOOL_CALL_MESSAGE", "OpenTurnAnswer", "Screen", "answer_open_turn"]

Screen = Callable[[ToolCall], Awaitable[ToolCallOutcome | None]]
"""What sees a never-started call before it is dispatched: ``None`` lets it run."""

WORKER_STOPPED_TOOL_CALL_MESSAGE: Final = (
    "This call was started, but the worker running it stopped before it finished "
    "(its process ended, or it lost the run), so it is unknown whether it took "
    "effect. Check its effect before repeating it."
)
"""What a resume answers for a non-repeatable call whose receipt says ``"started"``.

The worker that dispatched the call stopped while it ran, without a word (a
crash, a ``SIGKILL``, a lost lease): nothing cancelled it, so the answer says
so. A call a cancel cut off (receipt ``"interrupted"``) is answered with
[INTERRUPTED_TOOL_CALL_MESSAGE][juno_bind_trio.INTERRUPTED_TOOL_CALL_MESSAGE].
Both are ``kind: "interrupted"``: the effect is unknown, check it first.
"""


def _earlier_args_hash(raw: str) -> str:
    """The arguments' hash as versions before the one arguments rule wrote it.

    They hashed ``json.loads`` of the text, or the text where that failed, so
    ``""``, ``"null"`` and a bare JSON value hashed apart from ``"{}"``. A run
    stored by such a version and resumed by this one keeps its receipts: a
    call that finished is still answered from its receipt, never run again.
    """
    try:
        return tool_call_args_hash(json.loads(raw))
    except (TypeError, ValueError, RecursionError):
        return tool_call_args_hash(raw)


@final
@attrs.frozen
class OpenTurnAnswer:
    """How a resume answered one call of the open turn.

    ``action`` is [decide_tool_call_receipt][juno_bind_trio.run.decide_tool_call_receipt]'s:
    ``"reuse"`` (its receipt's answer), ``"run"`` (dispatched now) or
    ``"refuse"`` (answered as interrupted, not run); for a call the screen
    (the agent's approval gate) took, ``"answer"`` (answered by its decision:
    a denial, an expiry, an external result) or ``"hold"`` (it still waits).
    ``state`` is what the receipt said (``"absent"`` for none); ``reason``
    says why in a sentence.
    """

    tool_call_id: str
    tool_name: str
    state: str
    action: str
    reason: str


async def answer_open_turn(
    run_id: str,
    turn: Mapping[str, Any],
    receipts: Sequence[ReceiptRecord],
    *,
    resumability: Callable[[str], EffectResumability],
    uses_idempotency_key: Callable[[str], bool],
    run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]],
    per_tool_limit: int,
    runs_serially: Callable[[ToolCallLike], bool] | None,
    screen: Screen | None = None,
) -> tuple[list[dict[str, Any]], tuple[OpenTurnAnswer, ...]]:
    """One answer per call of *turn*, in call order, and how each was decided.

    *run_tool_call* dispatches a call that may run (with its receipts); the
    calls *runs_serially* picks run first, one at a time, in call order, then
    the rest through the pool at *per_tool_limit* calls a tool at once.
    *screen* ``async (call) -> ToolCallOutcome | None`` sees each call that
    may run first, in call order: an outcome is its answer (with a suspend
    directive: it still waits), ``None`` lets it be dispatched.
    """
    by_id: dict[str, ReceiptRecord] = {r.tool_call_id: r for r in receipts}
    # Each call read once: its receipt key, its dispatch and its tool read the same value.
    calls = [ToolCall.of(call) for call in turn["tool_calls"]]
    answers: list[dict[str, Any] | None] = [None] * len(calls)
    decisions: list[OpenTurnAnswer] = []
    to_run: list[int] = []
    for index, call in enumerate(calls):
        key = tool_call_receipt_key(run_id, call)
        receipt = by_id.get(key.tool_call_id)
        state: ReceiptState = "absent" if receipt is None else receipt.state
        if receipt is not None and receipt.args_hash not in (
            key.args_hash,
            _earlier_args_hash(call.arguments),
        ):
            state = "absent"  # a receipt for other arguments is no receipt of this call
        how = resumability(key.tool_name)
        if how == "non_repeatable" and uses_idempotency_key(key.tool_name):
            how = "repeatable"  # the service drops a repeat of the same key
        decision = decide_tool_call_receipt(state, how)
        decisions.append(
            OpenTurnAnswer(key.tool_call_id, key.tool_name, state, decision.action, decision.reason)
        )
        if decision.action == "reuse":
            assert receipt is not None
            answers[index] = receipt.message
        elif decision.action == "refuse":
            # "started": the worker stopped while the call ran (nothing cancelled
            # it); "interrupted": a cancel cut it off. Either way, unknown.
            why = (
                WORKER_STOPPED_TOOL_CALL_MESSAGE
                if state == "started"
                else INTERRUPTED_TOOL_CALL_MESSAGE
            )
            answers[index] = tool_failure_message(key.tool_call_id, why, "interrupted")
        elif screen is not None and (screened := await screen(call)) is not None:
            answers[index] = screened.tool_message
            held = screened.suspend is not None
            decisions[-1] = OpenTurnAnswer(
                key.tool_call_id,
                key.tool_name,
                state,
                "hold" if held else "answer",
                "the call waits for a decision" if held else "its decision answers it",
            )
        else:
            to_run.append(index)
    # As the loop runs a batch: the serial calls first, each in a pool batch of its
    # own, in call order; then the rest through one pooled batch.
    serial = [i for i in to_run if runs_serially is not None and runs_serially(calls[i])]
    pooled = [i for i in to_run if i not in serial]
    ran: list[tuple[int, outcome.Outcome[ToolCallOutcome]]] = []
    for index in serial:
        alone: ToolBatch[ToolCallOutcome] = ToolBatch([calls[index]])
        (result,) = await alone.run(run_tool_call, per_tool_limit=1)
        ran.append((index, result))
    if pooled:
        batch: ToolBatch[ToolCallOutcome] = ToolBatch([calls[i] for i in pooled])
        results = await batch.run(run_tool_call, per_tool_limit=per_tool_limit)
        ran.extend(zip(pooled, results, strict=True))
    for index, result in ran:
        answers[index] = _answer(calls[index].id, result)
    return [a for a in answers if a is not None], tuple(decisions)


def _answer(call_id: str, result: outcome.Outcome[ToolCallOutcome]) -> dict[str, Any]:
    """The tool message for a call the resume dispatched, as the loop would write it."""
    if isinstance(result, outcome.Value) and isinstance(result.value, ToolCallOutcome):
        return result.value.tool_message
    error = (
        result.error
        if isinstance(result, outcome.Error)
        else TypeError(f"run_tool_call must return a ToolCallOutcome, got {result!r}")
    )
    return tool_failure_message(call_id, tool_error_text(error), kind_for_error(error))
