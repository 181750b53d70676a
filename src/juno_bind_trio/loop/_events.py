"""What the loop tells its host while it runs, and what the host can tell it.

Out: [`LoopEvent`][juno_bind_trio.loop.LoopEvent], sent on an anyio (or trio) memory object send
stream with ``send_nowait``. In: [`Interrupt`][juno_bind_trio.loop.Interrupt], received on a memory
object receive stream with ``receive_nowait``, between iterations.

Why a channel and not callbacks: a callback runs *in* the loop, so a host
logger that throws while reporting a tool failure turns a reported failure
into a fatal one, and a slow one stalls the run. A channel puts the observer
in its own task. The loop never waits on it and never learns that it failed,
beyond a count ([`statistics()`][juno_bind_trio.loop.ToolLoop.statistics]).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs

if TYPE_CHECKING:
    from juno_bind_trio.plugins import ToolFailureKind

__all__ = [
    "AssistantMessageEvent",
    "Interrupt",
    "InterruptReceivedEvent",
    "LoopEvent",
    "LoopStatus",
    "OutputProgressEvent",
    "StatusEvent",
    "TextSinkErrorsEvent",
    "ThinkingEvent",
    "ToolCallRejectedEvent",
]

LoopStatus = Literal["calling_model", "running_tools", "compacting", "saving_session"]
"""The phase a [`StatusEvent`][juno_bind_trio.loop.StatusEvent] announces, sent as the loop enters
it."""


@attrs.frozen
class StatusEvent:
    """The loop entered a phase of iteration *iteration* (the run's count, from 1)."""

    iteration: int
    status: LoopStatus


@attrs.frozen
class ThinkingEvent:
    """The model's reasoning for a turn, as ``call_model`` returned it (never streamed)."""

    iteration: int
    text: str


@attrs.frozen
class AssistantMessageEvent:
    """An assistant message landed in the transcript with non-empty text.

    Sent once per message, including the text a model writes *alongside* tool
    calls, as soon as it is recorded rather than at the end of the run. It is
    the permanent record; the turn text stream is the live view. Wire them to
    different surfaces, or the text shows twice.
    """

    iteration: int
    content: str
    has_tool_calls: bool


@attrs.frozen
class OutputProgressEvent:
    """``call_model`` reported progress: a count of output tokens, never content."""

    iteration: int
    output_tokens: int
    tool_calls: int


@attrs.frozen
class ToolCallRejectedEvent:
    """A tool call was answered with a failure: it raised, was refused, or was cut off.

    *kind* is the envelope's ``kind`` (``"not_run"`` for a refusal,
    ``"interrupted"`` for a call a hard cancel cut off, ``None`` for an
    ordinary failure that named none); *message* the envelope's ``error``.
    *error* is the exception itself, for a log.
    """

    iteration: int
    tool_call_id: str
    tool_name: str
    kind: ToolFailureKind | None
    message: str
    error: BaseException = attrs.field(eq=False)


@attrs.frozen
class TextSinkErrorsEvent:
    """A turn's text did not all reach its sink: *sink_errors* events raised in ``emit``.

    Sent once per turn that lost any, when its text stream is finished (after
    a failed turn too). The reader of that turn is now out of step: a closed
    reader, a full or broken transport. *text* is the turn's text as the
    reader should show it ([TurnTextStream.text][juno_bind_trio.completion.TurnTextStream.text]),
    so ``view.resync(event.text)`` repairs a view in one call. The run goes
    on; the total is in [RunStats.text_sink_errors][juno_bind_trio.loop.RunStats].
    """

    iteration: int
    turn_id: str
    sink_errors: int
    text: str


@attrs.frozen
class Interrupt:
    """A message the user sent while the run was going, to be seen by the next model call.

    Appended to the transcript as ``{"role": "user", "content": content}``.
    *user_id* is carried to [`InterruptReceivedEvent`][juno_bind_trio.loop.InterruptReceivedEvent]
    for the host's own bookkeeping and is not written into the transcript.
    """

    content: str = attrs.field()
    user_id: str | None = attrs.field(default=None, kw_only=True)

    @content.validator
    def _check_content(self, _attribute: object, value: object) -> None:
        if not isinstance(value, str):
            raise TypeError(f"Interrupt: content must be a str, got {value!r}")

    @user_id.validator
    def _check_user_id(self, _attribute: object, value: object) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"Interrupt: user_id must be a str or None, got {value!r}")


@attrs.frozen
class InterruptReceivedEvent:
    """An [`Interrupt`][juno_bind_trio.loop.Interrupt] was drained and appended before model call
    *iteration*."""

    iteration: int
    interrupt: Interrupt


LoopEvent: TypeAlias = (
    StatusEvent
    | ThinkingEvent
    | AssistantMessageEvent
    | OutputProgressEvent
    | ToolCallRejectedEvent
    | InterruptReceivedEvent
    | TextSinkErrorsEvent
)
"""Every event the loop sends."""
