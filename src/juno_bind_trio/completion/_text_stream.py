"""Streaming a turn's assistant text to a live surface, safely across retries.

Forwarding deltas is one line in a host's transport. What is not one line, and
what every host that streams has to get right on its own, is what happens when
the attempt that produced those deltas *fails*. Routing's answer to a failure
is to try again: the same endpoint, then the next provider, then the fallback
model. Each of those re-renders a turn the user is already reading.

The old answer was to refuse: a transport that had streamed set
``produced_output`` on its failure and the executor clamped to propagate-only.
That trades a recoverable failure for a visible one: a 500 from the first
provider becomes an error on the user's screen, only because the first token
had already left.

When the surface can be *retracted* there is a better answer: tell it to
discard what it has, then stream the retry cleanly. This module does that. It
makes ``produced_output`` mean what routing needs it to mean, "did we emit
somewhere the caller cannot take back", so a retractable surface keeps the
whole fallback chain.

Lifetime: one stream per turn, and ``finish()`` on every path
-------------------------------------------------------------

Build it where the turn is owned, outside the route executor and outside any
structured-output retry loop, and call
[`TurnTextStream.finish()`][juno_bind_trio.completion.TurnTextStream.finish] however the turn ended.
Neither rule can be enforced from in here. A stream built inside the attempt function never sees a
second attempt: it never resets and ``produced_output`` is never true, so the single-attempt path
(almost all traffic) looks correct and the bug shows only under fallback, as two partial
answers glued together. Skipping ``finish()`` leaves an armed reset undelivered
whenever the attempt that *succeeds* emits no text, which is the ordinary shape
of a tool-calling turn (``content: None`` plus ``tool_calls``): the discarded
attempt's narration stays on screen as if the replacing turn had said it.
([`ToolLoop`][juno_bind_trio.loop.ToolLoop] can own the stream for you and so
enforce both rules.)

What the host still owns
------------------------

The sink, and what goes into it. **Reasoning deltas have their own door**:
[`reasoning()`][juno_bind_trio.completion.TurnTextStream.reasoning] sends each one as a
[ReasoningEvent][juno_bind_trio.completion.ReasoningEvent] to a sink with
``emit_reasoning(event)`` (any other is sent none), under the text's rules: a
reset withdraws it, the next attempt's first piece of it sends that reset,
and on a permanent sink, which cannot take it back, it is output like text.
On a retractable one it never latches ``produced_output`` by itself.

**Tool-call deltas are not output.** A tool call is not a side effect until it
is dispatched, which happens after the turn, so a turn that died having
streamed only tool-call bytes changed nothing anyone can see, and clamping it
would forfeit a fallback for nothing. A retractable sink that wants to show
the arguments as they arrive has ``emit_tool_call_delta(event)``:
[`tool_call_delta()`][juno_bind_trio.completion.TurnTextStream.tool_call_delta]
hands it each fragment under the same attempt rules as text (a fallback's
reset withdraws them, and the retry's first fragment sends that reset), and
they never latch ``produced_output``. Any other sink is sent none. A host
with a real mid-attempt effect says so with
[`mark_produced_output()`][juno_bind_trio.completion.TurnTextStream.mark_produced_output] rather
than by widening what counts as text.

The loop's assistant-message event is a different surface: it fires once per
completed message, while these events stream one attempt of one message.
Deltas drive the live view; the assistant message drives the permanent record.
Wiring both to one element shows the text twice.

Why the reset is lazy
---------------------

It is sent on the retry's **first byte**, not when the previous attempt
failed. A retry that dies before producing anything (no viable endpoint, an
immediate 401) would otherwise wipe the screen to show nothing, and partial
text plus an error is more use to a reader than a blank space plus an error. A
turn in which no attempt ever emits therefore emits no events at all. The one
reset that must not wait is one still armed when the turn ends; ``finish``
flushes it, because by then the text it retracts is known to be from an
attempt that was thrown away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, final

import attrs

from juno_bind_trio._errors import TurnStreamUsageError
from juno_bind_trio._validate import count, error_kind

from ._coalescing import CoalescingSink
from ._events import RESET_REASONS, ResetEvent, TextEvent, TurnResetReason, TurnStreamEvent
from ._reasoning import ReasoningEvent
from ._sinks import TurnStreamSink
from ._tool_call_delta import ToolCallDeltaEvent

__all__ = ["TurnOutcome", "TurnTextStream"]

TurnOutcome = Literal["succeeded", "failed"]

# The hot path builds a TextEvent per delta. attrs' frozen __init__ goes through
# object.__setattr__ once per field; setting the slots directly is the same
# effect (a fully initialised, frozen event) at well under half the cost, which
# is what keeps observe() within its budget of 2x a bare NamedTuple append.
_new_event: Final = object.__new__
_set_turn_id: Final = TextEvent.__dict__["turn_id"].__set__
_set_epoch: Final = TextEvent.__dict__["epoch"].__set__
_set_seq: Final = TextEvent.__dict__["seq"].__set__
_set_text: Final = TextEvent.__dict__["text"].__set__


def _check_max_resets(_self: object, _attr: object, value: Any) -> None:
    # A count refuses `True` and every float (1.5, and above all nan, which
    # compares false against everything, so an unchecked non-finite cap would
    # read as "unbounded": the opposite of the safe failure of an option whose
    # job is to bound).
    if value is not None:
        count().check("TurnTextStream: max_resets", value)


def _check_turn_id(_self: object, _attr: object, value: Any) -> None:
    # Every plausible way to get here (`turn_id=msg.id or ""`) collapses every
    # turn of a run into one scope on the client, the bug the field exists to stop.
    if not isinstance(value, str) or value == "":
        raise error_kind(value, str)(
            f"TurnTextStream: turn_id must be a non-empty string, got {value!r}"
        )


def _check_sink(_self: object, _attr: object, value: Any) -> None:
    # `retractable` is deliberately not touched here: it is read exactly once,
    # in __attrs_post_init__, and a probe would be a second read.
    emit = getattr(value, "emit", None)
    if not callable(emit):
        raise TypeError(
            "TurnTextStream: sink must have a bool `retractable` and a callable `emit(event)`, "
            f"got {value!r}"
        )


@final
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class TurnTextStream:
    """Streams one turn's assistant text to a sink and repairs it across retries.

    ``TurnTextStream(sink=..., turn_id=..., max_resets=None)``.

    *turn_id* identifies the turn on the wire: any string the client can
    compare for equality and that is unique among the turns it may see at
    once (a message id; a run id plus a turn ordinal). It is required because
    a client cannot scope ``epoch`` and ``seq`` without it. It is a
    correlation label, never an authorization boundary: the sink must already
    be scoped to the right recipient.

    *max_resets* caps how many times the surface may be wiped in one turn.
    Reaching it raises nothing and does not stop emission: it makes
    [`produced_output`][juno_bind_trio.completion.TurnTextStream.produced_output] true, so the
    *next* failure clamps routing, while an attempt already in flight still reaches the reader.
    There is no default cap: a plan with three stages, three candidates and two defect retries can
    legally wipe the screen more than twenty times, and the tolerable number
    is a product judgement about flicker. Because it gates routing, it also
    shapes how many endpoints record a failure against the circuit breaker for
    one user turn.

    Not thread-safe and not a task: every method is synchronous and runs no
    checkpoint, so it is safe to call from inside a cancel scope at any point.
    """

    _sink: TurnStreamSink = attrs.field(validator=_check_sink, alias="sink")
    _turn_id: str = attrs.field(validator=_check_turn_id, alias="turn_id")
    _max_resets: int | None = attrs.field(
        default=None, validator=_check_max_resets, alias="max_resets"
    )
    # Snapshotted, never re-read: see TurnStreamSink.retractable.
    _retractable: bool = attrs.field(init=False)
    # Bound once: the hot path calls it per delta.
    _emit_fn: object = attrs.field(init=False)
    # The sink's emit_tool_call_delta, if it is retractable and has one.
    _delta_fn: Callable[[ToolCallDeltaEvent], None] | None = attrs.field(default=None, init=False)
    # The sink's emit_reasoning, if it has one.
    _reasoning_fn: Callable[[ReasoningEvent], None] | None = attrs.field(default=None, init=False)
    # A CoalescingSink takes text without an event object (see observe).
    _text_fn: Callable[[str, int, str], None] | None = attrs.field(default=None, init=False)
    _epoch: int = attrs.field(default=-1, init=False)
    _seq: int = attrs.field(default=0, init=False)
    _reset_count: int = attrs.field(default=0, init=False)
    _sink_errors: int = attrs.field(default=0, init=False)
    _finished: bool = attrs.field(default=False, init=False)
    # Text has reached the sink at least once this turn. Distinct from
    # produced_output, which also asks whether it can be taken back.
    _emitted: bool = attrs.field(default=False, init=False)
    # Held rather than sent at once, so an attempt that dies before producing
    # anything leaves the previous text on screen.
    _reset_pending: TurnResetReason | None = attrs.field(default=None, init=False)
    # The surface shows an epoch it will never be told to clear: a reset was
    # refused, or the flicker budget ran out before one could be armed. Both
    # mean the same and must behave the same: stop writing to it. Treating them
    # differently splices two answers together (the budget path would arm no
    # reset and then append the next attempt's text onto the abandoned one).
    _stale_surface: bool = attrs.field(default=False, init=False)
    # Whether a reset was EVER lost. Separate from _stale_surface, which clears
    # when a later reset lands, because produced_output must never un-latch.
    _ever_lost_reset: bool = attrs.field(default=False, init=False)
    _external_effect: bool = attrs.field(default=False, init=False)
    # The turn's text, kept for a resync: this attempt's pieces, and those of
    # the latest earlier attempt that produced any (what a retractable surface
    # still shows until this attempt's first byte sends the lazy reset).
    _parts: list[str] = attrs.field(factory=list, init=False)
    _previous: list[str] = attrs.field(factory=list, init=False)
    _outcome: TurnOutcome | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        try:
            retractable = self._sink.retractable
        except AttributeError:
            raise TypeError(
                "TurnTextStream: sink must have a bool `retractable` and a callable "
                f"`emit(event)`, got {self._sink!r}"
            ) from None
        if not isinstance(retractable, bool):
            raise TypeError(f"TurnTextStream: sink.retractable must be a bool, got {retractable!r}")
        self._retractable = retractable
        self._emit_fn = self._sink.emit
        sink = self._sink
        delta_fn = getattr(sink, "emit_tool_call_delta", None)
        if retractable and callable(delta_fn):
            self._delta_fn = delta_fn
        reasoning_fn = getattr(sink, "emit_reasoning", None)
        if callable(reasoning_fn):
            self._reasoning_fn = reasoning_fn
        if isinstance(sink, CoalescingSink):  # final: no subclass overrides emit
            self._text_fn = sink._emit_text

    def __repr__(self) -> str:
        return (
            f"<TurnTextStream turn_id={self._turn_id!r} epoch={self._epoch} "
            f"resets={self._reset_count} sink_errors={self._sink_errors} "
            f"produced_output={self.produced_output} finished={self._finished}>"
        )

    # -- read-only state -----------------------------------------------------

    @property
    def turn_id(self) -> str:
        """The turn's id, as sent on every event."""
        return self._turn_id

    @property
    def retractable(self) -> bool:
        """The sink's ``retractable``, as read once at construction."""
        return self._retractable

    @property
    def max_resets(self) -> int | None:
        """The flicker budget, or ``None`` for no cap."""
        return self._max_resets

    @property
    def epoch(self) -> int:
        """The current attempt's epoch: ``-1`` before the first
        [`begin_attempt()`][juno_bind_trio.completion.TurnTextStream.begin_attempt]."""
        return self._epoch

    @property
    def reset_count(self) -> int:
        """Resets *handed to the sink* so far.

        A reset whose ``emit`` raised is counted: it spent the flicker budget,
        and whether the client saw it is exactly what this side cannot know.
        """
        return self._reset_count

    @property
    def sink_errors(self) -> int:
        """Events whose ``emit`` raised.

        Emission goes on after a failure rather than tearing the turn down: a
        socket closed for a moment should not end a model turn that is fine.
        On a permanent surface a failed event still counts as output (the sink
        got far enough to fail; whether bytes left first is unknowable, so the
        safe reading is that they did). On a retractable one a failed *text*
        event leaves the turn replayable, but a failed *reset* does not: the
        wipe is the one event whose loss sending more cannot repair, so it
        latches [`produced_output`][juno_bind_trio.completion.TurnTextStream.produced_output]
        instead of letting a second epoch stack onto a surface that never cleared the first.
        """
        return self._sink_errors

    @property
    def text(self) -> str:
        """The turn's text now: what its reader should show, and what to resync one from.

        On a retractable surface it is the text of the attempt that owns the
        screen: the latest attempt that produced text (a retry that has not
        produced any yet leaves the previous attempt's text in place, as the
        lazy reset does), or ``""`` once ``finish("succeeded")`` retracted an
        attempt the successful one replaced without text. On a permanent
        surface, which is never reset, it is every attempt's text in order.

        It does not depend on the sink: after
        [`sink_errors`][juno_bind_trio.completion.TurnTextStream.sink_errors], or once the flicker
        budget stranded the surface on an older attempt, this is the text the reader *should* have,
        so ``view.resync(stream.text)`` repairs it in one call.
        """
        if self._outcome == "succeeded" or self._parts:
            return "".join(self._parts)
        return "".join(self._previous)

    @property
    def finished(self) -> bool:
        """Whether [`finish()`][juno_bind_trio.completion.TurnTextStream.finish] has been called."""
        return self._finished

    @property
    def produced_output(self) -> bool:
        """Whether output reached a surface the caller **cannot take back**.

        Exactly the flag the route executor clamps on: put it straight on the
        failure outcome, ``AttemptFailure(error, produced_output=stream.produced_output)``.

        For a retractable sink it stays false while a wipe is still available,
        so routing keeps its whole fallback chain. It latches true when the
        reset budget is spent, when a reset failed to reach the sink, or when
        the host reported an out-of-band effect. Monotonic: never true, then
        false.

        It answers "may routing replay this turn", not "is the reader looking
        at output". The two agree wherever the executor reads it (on a
        failure) but not elsewhere: a turn that spent its flicker budget and
        then succeeded reads true although its text was retracted. Do not
        source a "did the user see anything" metric from it.
        """
        if self._external_effect:
            return True
        if not self._emitted:
            return False
        return not self._retractable or self._ever_lost_reset or self._budget_spent()

    # -- the protocol ----------------------------------------------------------

    def begin_attempt(self, reason: TurnResetReason | None = None) -> None:
        """Open a new attempt. Call it at the **top of every attempt**, the first included.

        That is once per attempt-function call (covering same-endpoint defect
        retries, provider traversal and model fallback in one place), plus once
        per structured-output retry, which happens outside the executor in the
        caller's own loop.

        After an attempt that produced text this arms a reset, sent lazily
        when this attempt first produces text (or by
        [`finish()`][juno_bind_trio.completion.TurnTextStream.finish], if it never does).

        An explicit *reason* **sticks** until the reset is delivered, and a
        later call without one does not overwrite it. Without that the
        ``"structured_output_retry"`` reason could never reach the wire in the
        composition this module prescribes: the caller's retry loop opens the
        attempt with a reason, then re-enters the executor, whose attempt
        function opens the same pending reset again with the default.
        """
        if reason is not None and reason not in RESET_REASONS:
            raise ValueError(
                "TurnTextStream.begin_attempt: reason must be one of "
                f"{sorted(RESET_REASONS)!r} or None, got {reason!r}"
            )
        if self._finished:
            return
        # A permanent surface is never reset: its reader shows every attempt.
        if self._parts and self._retractable:
            self._previous = self._parts
            self._parts = []
        # The epoch moves on every attempt, whether or not a reset is owed: it
        # names the attempt, and a host correlating logs on it should not see it
        # stall because an earlier attempt happened to stay silent.
        self._epoch += 1
        # Nothing on screen yet, so nothing to retract.
        if not self._emitted:
            return
        # A permanent surface cannot honour a retraction, and telling it to is
        # worse than not: a defensive sink reads it as a protocol error and a
        # naive one may delete a message it already posted. Its produced_output
        # latched on the first byte, so routing has already stopped.
        if not self._retractable:
            return
        # No wipe left, so this attempt's text would land on top of the last one
        # rather than replace it. The executor has already been told to stop
        # (produced_output is true), so whatever still drives attempts is a
        # caller-owned loop (a structured-output retry), and appending its output
        # to an abandoned answer is the splice this module exists to prevent.
        if self._budget_spent():
            self._stale_surface = True
            return
        # An explicit reason outranks a later default. Spelt out rather than as
        # `reason or self._reset_pending or ...`: the middle term is what keeps
        # an EARLIER explicit reason through a later defaulted call, the point.
        if reason is not None:
            self._reset_pending = reason
        elif self._reset_pending is None:
            self._reset_pending = "attempt_failed"

    def observe(self, text: str | None) -> None:
        """Forward one content delta.

        ``None`` and ``""`` are no-ops and do not count as output: a provider
        that sent an empty content field has shown the user nothing.

        Raises [`TurnStreamUsageError`][juno_bind_trio.TurnStreamUsageError] if no attempt was
        opened yet, and ``TypeError`` for a delta that is not a string.
        """
        if self._finished:
            return
        # Checked before the empty-text shortcut: this catches a host that never
        # opened an attempt, and a host whose first chunk happens to be empty
        # must not ship green and then produce retries nobody can tell apart.
        if self._epoch < 0:
            raise TurnStreamUsageError(
                "TurnTextStream.observe() before begin_attempt(): every attempt must open "
                "one, or a retry cannot be told apart from the turn it replaces"
            )
        if not text:
            if text is None or text == "":
                return
            raise TypeError(f"TurnTextStream.observe: text must be a str or None, got {text!r}")
        if text.__class__ is not str and not isinstance(text, str):
            raise TypeError(f"TurnTextStream.observe: text must be a str or None, got {text!r}")
        # Recorded whatever reaches the sink: it is what a resync restores.
        self._parts.append(text)
        # Checked BEFORE the flush: once the surface is stranded, sending it more
        # (another reset included) only compounds it. A reset now would clear
        # text the reader relies on and then be followed by nothing, a blank
        # message on a turn that may well succeed. One coherent, if stale,
        # answer beats a spliced one and an empty one; sink_errors is the
        # host's cue to force a resync.
        if self._stale_surface:
            return
        # The flush's answer matters: if the reset failed to land, the surface
        # still shows the epoch it was told to clear, and this text would be
        # glued onto it.
        if self._reset_pending is not None and not self._flush_reset():
            return
        self._emitted = True
        # Stamped before emit, so a re-entrant sink that opens another attempt
        # from inside emit cannot back-date this delta to the newer epoch.
        seq = self._seq
        self._seq = seq + 1
        text_fn = self._text_fn
        if text_fn is not None:
            # The same-process reader's sink: it stamps its own seq on delivery,
            # so the event this would build is never read.
            try:
                text_fn(self._turn_id, self._epoch, text)
            except Exception:
                self._sink_errors += 1
            return
        event = _new_event(TextEvent)
        _set_turn_id(event, self._turn_id)
        _set_epoch(event, self._epoch)
        _set_seq(event, seq)
        _set_text(event, text)
        try:
            self._emit_fn(event)  # type: ignore[operator]
        except Exception:
            self._sink_errors += 1

    def tool_call_delta(
        self, index: int, tool_call_id: str | None, name: str | None, delta: str
    ) -> None:
        """Forward one fragment of a streamed tool call, for a surface that shows arguments live.

        *index*: the call's position in the message; *tool_call_id* / *name*:
        as the fragment carried them (``None`` or ``""`` when it did not);
        *delta*: the next piece of the raw arguments (``""`` for none).

        A no-op unless the sink is retractable and has
        ``emit_tool_call_delta(event)``, and after
        [`finish()`][juno_bind_trio.completion.TurnTextStream.finish]. For such a sink the
        fragment counts as shown, as text does: the next attempt arms a reset
        that withdraws it, and a reset still armed is sent before it. It never
        latches [`produced_output`][juno_bind_trio.completion.TurnTextStream.produced_output]
        by itself (see the module's note on tool-call deltas).

        Raises [`TurnStreamUsageError`][juno_bind_trio.TurnStreamUsageError] before
        [`begin_attempt()`][juno_bind_trio.completion.TurnTextStream.begin_attempt], and
        ``TypeError`` / ``ValueError`` naming a value of the wrong type or range.
        """
        delta_fn = self._delta_fn
        if delta_fn is None or self._finished:
            return
        if self._epoch < 0:
            raise TurnStreamUsageError(
                "TurnTextStream.tool_call_delta() before begin_attempt(): every attempt must "
                "open one, or a retry cannot be told apart from the turn it replaces"
            )
        if index.__class__ is not int:
            raise TypeError(f"TurnTextStream.tool_call_delta: index must be an int, got {index!r}")
        if index < 0:
            raise ValueError(
                f"TurnTextStream.tool_call_delta: index must be non-negative, got {index!r}"
            )
        for label, value in (("tool_call_id", tool_call_id), ("name", name)):
            if value is not None and not isinstance(value, str):
                raise TypeError(
                    f"TurnTextStream.tool_call_delta: {label} must be a str or None, got {value!r}"
                )
        if not isinstance(delta, str):
            raise TypeError(f"TurnTextStream.tool_call_delta: delta must be a str, got {delta!r}")
        if not (delta or tool_call_id or name):
            return
        # The same two guards as observe(): a stranded surface is sent nothing,
        # and a reset that failed to land must not be followed by this attempt.
        if self._stale_surface:
            return
        if self._reset_pending is not None and not self._flush_reset():
            return
        self._emitted = True
        event = ToolCallDeltaEvent(
            turn_id=self._turn_id,
            index=index,
            tool_call_id=tool_call_id or None,
            name=name or None,
            delta=delta,
        )
        try:
            delta_fn(event)
        except Exception:
            self._sink_errors += 1

    def reasoning(self, text: str | None) -> None:
        """Forward one reasoning (thinking) delta, for a surface that shows the model's thinking.

        A no-op unless the sink has ``emit_reasoning(event)``, for ``None`` and
        ``""``, and after [`finish()`][juno_bind_trio.completion.TurnTextStream.finish]. For such
        a sink it follows the text's rules: a reset still armed is sent first, the next attempt
        arms one that withdraws it, and on a permanent sink it counts as output (it cannot be
        taken back there); on a retractable one it never latches
        [`produced_output`][juno_bind_trio.completion.TurnTextStream.produced_output] by itself.
        It is not part of [`text`][juno_bind_trio.completion.TurnTextStream.text].

        Raises [`TurnStreamUsageError`][juno_bind_trio.TurnStreamUsageError] before
        [`begin_attempt()`][juno_bind_trio.completion.TurnTextStream.begin_attempt], and
        ``TypeError`` for a delta that is not a string.
        """
        reasoning_fn = self._reasoning_fn
        if reasoning_fn is None or self._finished:
            return
        if self._epoch < 0:
            raise TurnStreamUsageError(
                "TurnTextStream.reasoning() before begin_attempt(): every attempt must open "
                "one, or a retry cannot be told apart from the turn it replaces"
            )
        if not text:
            if text is None or text == "":
                return
            raise TypeError(f"TurnTextStream.reasoning: text must be a str or None, got {text!r}")
        if not isinstance(text, str):
            raise TypeError(f"TurnTextStream.reasoning: text must be a str or None, got {text!r}")
        # observe()'s two guards: a stranded surface is sent nothing, and a
        # reset that failed to land must not be followed by this attempt.
        if self._stale_surface:
            return
        if self._reset_pending is not None and not self._flush_reset():
            return
        self._emitted = True
        event = ReasoningEvent(turn_id=self._turn_id, epoch=self._epoch, text=text)
        try:
            reasoning_fn(event)
        except Exception:
            self._sink_errors += 1

    def finish(self, outcome: TurnOutcome) -> None:
        """End the turn. Call it **however the turn ended**, and say which.

        The two outcomes do opposite things with a reset that is still armed:

        * ``"succeeded"`` **flushes** it. An attempt streamed text and failed,
          the retry succeeded with tool calls and no text, so nothing set off
          the lazy reset. Without the flush the failed attempt's narration
          stays on screen credited to a turn that never said it.
        * ``"failed"`` **drops** it. Every attempt failed and the last died
          before producing a byte. Flushing would wipe the screen to show
          nothing: a blank space plus an error where the reader could have had
          partial text plus an error.

        Idempotent. Afterwards every method is a no-op.

        Any other *outcome* is a bug in the caller, and it is probably on its
        way out of a failure: the stream is finished as ``"failed"`` first (as
        the TypeScript package does, so the reader keeps its partial text and
        nothing is left armed), and then ``ValueError`` says so.
        """
        valid = outcome == "succeeded" or outcome == "failed"
        if not self._finished:
            self._finished = True
            self._outcome = outcome if valid else "failed"
            if outcome == "succeeded":
                self._flush_reset()
            else:
                self._reset_pending = None
        if not valid:
            raise ValueError(
                f"TurnTextStream.finish: outcome must be 'succeeded' or 'failed', got {outcome!r}"
            )

    def mark_produced_output(self) -> None:
        """Latch [`produced_output`][juno_bind_trio.completion.TurnTextStream.produced_output] for a
        reason this module cannot see.

        A provider-side effect, a write a replay would repeat, a second
        surface the host wrote to itself. Irreversible, and a no-op after
        [`finish()`][juno_bind_trio.completion.TurnTextStream.finish] (the flag exists for the
        executor to read on a failure, and once the turn is over there is no failure left to clamp).

        It does **not** stop emission: if the attempt that reported the effect
        succeeds, its text is still the answer and must reach the reader; if
        it fails, the clamp has already stopped the executor.
        """
        if self._finished:
            return
        self._external_effect = True

    # -- internals ---------------------------------------------------------------

    def _budget_spent(self) -> bool:
        return self._max_resets is not None and self._reset_count >= self._max_resets

    def _deliver(self, event: TurnStreamEvent) -> bool:
        try:
            self._emit_fn(event)  # type: ignore[operator]
        except Exception:
            self._sink_errors += 1
            return False
        return True

    def _flush_reset(self) -> bool:
        """Send the armed reset, if any. Returns whether the surface may be written."""
        reason = self._reset_pending
        if reason is None:
            return not self._stale_surface
        self._reset_pending = None
        self._reset_count += 1
        seq = self._seq
        self._seq = seq + 1
        event = ResetEvent(turn_id=self._turn_id, epoch=self._epoch, seq=seq, reason=reason)
        if self._deliver(event):
            # The wipe landed: whatever was stranded on the surface is gone and
            # it is safe to write again.
            self._stale_surface = False
            return True
        self._stale_surface = True
        self._ever_lost_reset = True
        return False
