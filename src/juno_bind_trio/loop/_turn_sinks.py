"""Each turn's text stream, from the sink it writes to until that sink is closed.

The loop gives every model turn a fresh
[`TurnTextStream`][juno_bind_trio.completion.TurnTextStream] on the host's sink
(or on the sink a factory makes for the turn), finishes it however the turn
ended, reports a sink that raised, and closes a sink the loop owns. Every
step after the stream is made is synchronous, because it runs on the way out
of a cancel too; and a ``close()`` that raises while an exception is leaving
the run is logged, never raised over it (a cancellation above all).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast, final

from juno_bind_trio import _tracing
from juno_bind_trio._errors import UsageError
from juno_bind_trio.completion import TurnTextStream

from ._events import TextSinkErrorsEvent

if TYPE_CHECKING:
    from juno_bind_trio.completion import TurnOutcome, TurnStreamSink

    from ._counters import Counters
    from ._events import LoopEvent

__all__ = ["TurnSinks"]


def _is_sink(given: object) -> bool:
    """A sink, as opposed to a factory of sinks: it has an ``emit``."""
    return callable(getattr(given, "emit", None))


@final
class TurnSinks:
    """The loop's ``text_sink``, turned into one stream per turn and closed when owned."""

    __slots__ = ("_counters", "_emit", "_given", "_max_resets", "_owns", "_run_id", "_turn_sink")

    def __init__(
        self,
        given: TurnStreamSink | Callable[[str], TurnStreamSink] | None,
        *,
        owns: bool,
        max_resets: int | None,
        run_id: str,
        counters: Counters,
        emit: Callable[[LoopEvent], None] | None,
    ) -> None:
        self._given = given
        self._owns = owns
        self._max_resets = max_resets
        self._run_id = run_id
        self._counters = counters
        self._emit = emit
        # The sink a factory made for the turn streaming now, when the loop owns it.
        self._turn_sink: Any = None

    def open(self, turn_id: str) -> TurnTextStream | None:
        """The stream of turn *turn_id*, or ``None`` when the loop streams nothing."""
        given = self._given
        if given is None:
            return None
        sink: TurnStreamSink
        if _is_sink(given):
            sink = cast("TurnStreamSink", given)
        else:
            sink = cast("Callable[[str], TurnStreamSink]", given)(turn_id)
            if self._owns:
                if not callable(getattr(sink, "close", None)):
                    raise UsageError(
                        "ToolLoop: owns_text_sink=True, but the text_sink factory made a sink "
                        f"with no close() for turn {turn_id!r}: {sink!r}"
                    )
                self._turn_sink = sink
        return TurnTextStream(sink=sink, turn_id=turn_id, max_resets=self._max_resets)

    def finish(
        self, stream: TurnTextStream, iteration: int, outcome: TurnOutcome, *, leaving: bool
    ) -> None:
        """Finish the turn's stream, report its sink's errors, close the turn's own sink.

        Synchronous, no checkpoint. A turn whose sink raised has a reader out
        of step; it is said so, with the text to resync it from, rather than
        the count left on a stream nobody else holds.
        """
        stream.finish(outcome)
        errors = stream.sink_errors
        if errors:
            self._counters.text_sink_errors += errors
            if self._emit is not None:
                self._emit(TextSinkErrorsEvent(iteration, stream.turn_id, errors, stream.text))
        # Last: a close() that raises must not lose the report above.
        turn_sink = self._turn_sink
        if turn_sink is not None:
            self._turn_sink = None
            self._close(turn_sink, leaving=leaving)

    def close_owned(self, *, leaving: bool) -> None:
        """Close the host's sink if the loop owns it (a factory's are closed per turn)."""
        given = self._given
        if self._owns and _is_sink(given):
            self._close(given, leaving=leaving)

    def _close(self, sink: Any, *, leaving: bool) -> None:
        """Close a sink the loop owns; *leaving*: an exception is already leaving the run.

        Then what ``close()`` raises is logged and the exception leaving stays
        the one that leaves: a cancellation above all, which a close error
        raised here would replace (the scope around the run would never see
        it). Otherwise ``close()``'s error propagates.
        """
        if not leaving:
            sink.close()
            return
        try:
            sink.close()
        except Exception:
            _tracing.logger.exception(
                "run %s: the text sink's close() raised while the run was ending on an "
                "exception; that exception is kept",
                self._run_id,
            )
