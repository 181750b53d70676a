"""The one argument ``call_model`` receives: everything a turn needs, and the stream it owns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from ._events import OutputProgressEvent

if TYPE_CHECKING:
    from juno_bind_trio.completion import TurnTextStream

    from ._events import LoopEvent

__all__ = ["ModelTurn"]


@final
@attrs.define(eq=False, kw_only=True)
class ModelTurn:
    """One model call of a run, as handed to ``call_model``.

    * *iteration*: 1 for the first model call of the run, and so on.
    * *turn_id*: ``"<run_id>:<iteration>"``, unique per turn; the id the text
      stream puts on the wire.
    * *messages*: the live transcript. Read it; do not mutate it (the loop
      appends the assistant message itself, from the result).
    * *tools*: what ``build_tools`` returned for this turn.
    * *text_stream*: a [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream]
      made for this turn when the loop was given a ``text_sink``, else
      ``None``. Call its ``begin_attempt()`` at the top of every attempt and
      ``observe(delta)`` for each content delta; **do not call** ``finish()``:
      the loop does, however the turn ends, which is the rule a host building
      the stream itself could forget.

    [`report_progress()`][juno_bind_trio.loop.ModelTurn.report_progress] sends an
    [`OutputProgressEvent`][juno_bind_trio.loop.OutputProgressEvent]; it is synchronous, cheap and
    never raises into the turn.
    """

    iteration: int
    turn_id: str
    messages: list[dict[str, Any]]
    tools: Sequence[Any]
    text_stream: TurnTextStream | None
    _emit: Callable[[LoopEvent], None] = attrs.field(alias="emit", repr=False)

    def report_progress(self, output_tokens: int, tool_calls: int = 0) -> None:
        """Report *output_tokens* generated so far and *tool_calls* seen, for a live indicator."""
        given: object = output_tokens
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            raise TypeError(
                "ModelTurn.report_progress: output_tokens must be a non-negative integer, "
                f"got {output_tokens!r}"
            )
        count: object = tool_calls
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(
                "ModelTurn.report_progress: tool_calls must be a non-negative integer, "
                f"got {tool_calls!r}"
            )
        self._emit(OutputProgressEvent(self.iteration, output_tokens, tool_calls))
