"""A stream watchdog: two silence budgets on one cancel scope whose deadline moves.

The SDK's own timeout cannot do this job. The openai client's read timeout is
an idle limit *per socket read*, with a default of ten minutes, and it knows
nothing about what the bytes mean: an endpoint that accepted the request,
sent its headers and a role-only chunk and then sat in a queue looks alive to
it. What routing needs to know is narrower and has two parts:

* **Has the answer started?** The *time-to-first-token* budget runs from the
  moment the watchdog is entered until the first **answer** chunk (content, a
  refusal, or a tool-call delta). This is the tight budget, and it is tight
  because acting on it is cheap: nothing the reader has to see retracted was
  sent yet, so moving to the next endpoint costs only the time already spent.
  The commonest failure of a loaded provider (accepted, queued, never starts)
  is caught here.
* **Is it still coming?** The *inter-chunk* budget bounds the silence between
  two chunks once the stream is flowing. It is the patient one, because
  acting on it is expensive: the reader is looking at half an answer that a
  retry will wipe, and the tokens already paid for are thrown away.

Reasoning deltas: gated, not counted
------------------------------------

The first-token budget is gated on the first *answer* token, so reasoning may
flow before one (the TypeScript README, "Reasoning deltas"). Concretely:

* a reasoning chunk does **not** satisfy the first-token budget, which keeps
  running from the start: a model that thinks aloud for longer than the
  budget and has still not begun to answer is a stall;
* a reasoning chunk **does** count as a sign of life for the inter-chunk
  budget, so thinking that flows steadily is never mistaken for a dead
  stream; and before the first answer the deadline is whichever budget runs
  out first;
* before the first chunk of any kind only the first-token budget applies:
  prompt processing and hidden reasoning send nothing at all, and the
  inter-chunk budget is about gaps *between* chunks.

So a host serving a reasoning model raises ``time_to_first_token`` to cover
the longest thinking it is willing to wait for, and keeps the inter-chunk
budget as it is. Other chunks that carry no answer (the role-only first
chunk, a usage chunk, an empty delta) behave exactly like reasoning.

Which cancellations become a stall
----------------------------------

Only the watchdog's own. The scope's deadline is the only thing that cancels
it (nobody calls ``cancel()`` on it), so when the scope reports that it
caught a cancellation, that cancellation was the watchdog's, and the block
raises [`StreamStallError`][juno_bind_trio.StreamStallError] saying which budget ran
out. A cancellation from an enclosing scope (the run's deadline, a user
pressing stop) is not caught by this scope, so it leaves the block exactly as
it arrived: a stall and a cancellation are different outcomes and routing
must be able to tell them apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import TracebackType
from typing import Final, Literal, TypeAlias, cast, final

import anyio
import anyio.lowlevel
import attrs

from juno_bind_trio._errors import StreamStallError, UsageError
from juno_bind_trio._validate import real_number, shown

__all__ = [
    "DEFAULT_INTER_CHUNK_TIMEOUT",
    "DEFAULT_TIME_TO_FIRST_TOKEN",
    "StreamBudget",
    "StreamWatchdog",
    "StreamWatchdogStatistics",
]

StreamBudget: TypeAlias = Literal["time_to_first_token", "inter_chunk"]
"""The name of one of a [`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog]'s budgets, as
carried by
[`StreamStallError`][juno_bind_trio.StreamStallError]."""

DEFAULT_TIME_TO_FIRST_TOKEN: Final = 30.0
"""Seconds from the request to the first answer token: the tight budget.

Thirty seconds covers queueing plus prefill of a long prompt on a busy
endpoint, several times over what a healthy chat model needs, while still
handing a dead endpoint's turn to the next one before a reader gives up.
Raise it for reasoning models: their thinking counts against it.
"""

DEFAULT_INTER_CHUNK_TIMEOUT: Final = 60.0
"""Seconds of silence allowed between two chunks: the patient budget.

A healthy stream sends a chunk every few tens of milliseconds, so a minute of
silence is a dead connection, not a slow one; the budget is still twice the
first-token one because a stall caught here costs the reader a visible reset
and the tokens already streamed.
"""

_SLACK_FRACTION: Final = 0.001
_MAX_SLACK: Final = 0.1
# How late a stall may be reported on a fast stream: a thousandth of the
# inter-chunk budget, and never more than 100 ms (see StreamWatchdog._move_to).
# A thousandth of the default 60 s is 60 ms, which a stream at 50 tokens a
# second (a chunk every 20 ms) spans three chunks into: the scope is moved
# for one chunk in four instead of every one, and a minute's budget reported
# up to 60 ms late is the same verdict. (The cap was 10 ms: below a real
# provider's chunk gap, so every chunk of a real stream moved the scope.)

_TTFT: Final = "time_to_first_token"
_INTER: Final = "inter_chunk"


def _event_loop_clock() -> Callable[[], float]:
    """The running event loop's own clock, bound once per watchdog.

    ``anyio.current_time()`` finds the backend afresh on every call, which is
    most of what reporting a chunk would cost. The deadlines of anyio's cancel
    scopes are on exactly these clocks (the asyncio loop's ``time()``, trio's
    current clock), virtual ones included, so reading them directly is the
    same time, only cheaper.
    """
    try:
        token = anyio.lowlevel.current_token()
    except AttributeError:  # pragma: no cover - anyio < 4.11 has no current_token()
        return anyio.current_time
    loop_time = getattr(token.native_token, "time", None)
    if callable(loop_time):  # an asyncio event loop
        return cast("Callable[[], float]", loop_time)
    if token.backend_class.__name__ == "TrioBackend":
        import trio.lowlevel

        return trio.lowlevel.current_clock().current_time
    return anyio.current_time  # pragma: no cover - a backend anyio may add later


def _check_budget(name: str, value: object) -> float:
    # bool is an int subclass and True is never a number of seconds someone meant;
    # nan compares false against every deadline, so it would silently mean "never".
    seconds = real_number(value)
    if seconds is None:
        raise TypeError(
            f"StreamWatchdog: {name} must be a positive number of seconds, got {shown(value)}"
        )
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError(
            f"StreamWatchdog: {name} must be a positive number of seconds, got {shown(value)}"
        )
    return seconds


def _check_ttft(value: float) -> float:
    return _check_budget("time_to_first_token", value)


def _check_inter(value: float) -> float:
    return _check_budget("inter_chunk_timeout", value)


@attrs.frozen
class StreamWatchdogStatistics:
    """A snapshot of a [`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog], from
    [`StreamWatchdog.statistics()`][juno_bind_trio.completion.StreamWatchdog.statistics].

    Times are absolute, on the event loop's clock (``anyio.current_time()``);
    ``None`` where the event has not happened. ``budget`` and ``deadline`` are
    the budget that will fire next and when.
    """

    answer_chunks: int
    reasoning_chunks: int
    other_chunks: int
    started_at: float | None
    first_answer_at: float | None
    last_chunk_at: float | None
    budget: StreamBudget
    deadline: float
    stalled: bool


@final
# NO_OP: the budgets are converted once, at construction, and never set again;
# without it attrs routes every attribute write (several per chunk) through a
# converter hook, which cost more than the rest of a chunk's bookkeeping.
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class StreamWatchdog:
    """Cancels a stream that goes silent, and says which budget it broke.

    ``StreamWatchdog(time_to_first_token=30.0, inter_chunk_timeout=60.0)``,
    both in seconds (``math.inf`` switches a budget off). Wrap the loop that
    reads the stream and report each chunk as it arrives:

        with StreamWatchdog() as watchdog:
            async for chunk in stream:
                delta = chunk.choices[0].delta if chunk.choices else None
                if delta is not None and (delta.content or delta.tool_calls or delta.refusal):
                    watchdog.answer()
                elif delta is not None and reasoning_of(delta):
                    watchdog.reasoning()
                else:
                    watchdog.chunk()
                ...

    When a budget runs out, the block is cancelled at its next checkpoint and
    the ``with`` raises [`StreamStallError`][juno_bind_trio.StreamStallError] with
    ``budget`` set to ``"time_to_first_token"`` or ``"inter_chunk"`` and
    ``timeout`` to that budget. A cancellation from outside passes through
    untouched. ``async with`` works the same way, for symmetry with the
    ``async with`` around the stream itself.

    Put the watchdog **inside** the ``async with`` that owns the stream, so
    that on a stall the stream's own cleanup still runs on the way out and
    closes the connection.

    **Precision.** A stall is never reported before its budget has run out.
    On a stream whose chunks come faster than a thousandth of the
    inter-chunk budget apart (at most 100 ms: 60 ms for the default budget,
    three chunks of a 50 tokens/s stream), the cancel scope's deadline is
    filed up to that much late,
    so that most chunks do not have to move it; the stall is then reported
    at most that much after the budget ran out (a chunk arriving in that gap
    is still a stall, raised at the next checkpoint or at the block's exit).
    A stream with gaps of at least that size, and a burst arriving at one
    instant, get exact deadlines. [`deadline`][juno_bind_trio.completion.StreamWatchdog.deadline] is
    always the true one.

    One watchdog guards one stream: it cannot be entered twice. The reporting
    methods are synchronous and never checkpoint; after the block has exited
    they do nothing, so a late callback from a closed stream is harmless.
    """

    _time_to_first_token: float = attrs.field(
        default=DEFAULT_TIME_TO_FIRST_TOKEN, converter=_check_ttft, alias="time_to_first_token"
    )
    _inter_chunk_timeout: float = attrs.field(
        default=DEFAULT_INTER_CHUNK_TIMEOUT, converter=_check_inter, alias="inter_chunk_timeout"
    )
    _scope: anyio.CancelScope | None = attrs.field(default=None, init=False)
    _clock: Callable[[], float] = attrs.field(default=anyio.current_time, init=False)
    _state: Literal["new", "open", "closed"] = attrs.field(default="new", init=False)
    _started_at: float | None = attrs.field(default=None, init=False)
    _ttft_deadline: float = attrs.field(default=math.inf, init=False)
    _deadline: float = attrs.field(default=math.inf, init=False)
    _budget: StreamBudget = attrs.field(default=_TTFT, init=False)
    _first_answer_at: float | None = attrs.field(default=None, init=False)
    _last_chunk_at: float | None = attrs.field(default=None, init=False)
    _answer_chunks: int = attrs.field(default=0, init=False)
    _reasoning_chunks: int = attrs.field(default=0, init=False)
    _other_chunks: int = attrs.field(default=0, init=False)
    _stalled: bool = attrs.field(default=False, init=False)
    _scope_deadline: float = attrs.field(default=math.inf, init=False)
    _slack: float = attrs.field(default=0.0, init=False)
    _late: bool = attrs.field(default=False, init=False)

    def __repr__(self) -> str:
        return (
            f"<StreamWatchdog time_to_first_token={self._time_to_first_token:g} "
            f"inter_chunk_timeout={self._inter_chunk_timeout:g} state={self._state} "
            f"budget={self._budget} stalled={self._stalled}>"
        )

    # -- configuration and state -------------------------------------------------

    @property
    def time_to_first_token(self) -> float:
        """Seconds from entry to the first answer chunk."""
        return self._time_to_first_token

    @property
    def inter_chunk_timeout(self) -> float:
        """Seconds of silence allowed between two chunks."""
        return self._inter_chunk_timeout

    @property
    def deadline(self) -> float:
        """When the budget runs out unless a chunk arrives first (``math.inf`` before entry).

        The stall itself may be reported a little later on a fast stream (see
        the class's note on precision), never earlier.
        """
        return self._deadline

    @property
    def budget(self) -> StreamBudget:
        """The budget that [`deadline`][juno_bind_trio.completion.StreamWatchdog.deadline] belongs
        to."""
        return self._budget

    @property
    def answered(self) -> bool:
        """Whether the first answer chunk has arrived."""
        return self._first_answer_at is not None

    @property
    def stalled(self) -> bool:
        """Whether the block ended in a [`StreamStallError`][juno_bind_trio.StreamStallError]."""
        return self._stalled

    def statistics(self) -> StreamWatchdogStatistics:
        """Counts and times so far, as a frozen record."""
        return StreamWatchdogStatistics(
            answer_chunks=self._answer_chunks,
            reasoning_chunks=self._reasoning_chunks,
            other_chunks=self._other_chunks,
            started_at=self._started_at,
            first_answer_at=self._first_answer_at,
            last_chunk_at=self._last_chunk_at,
            budget=self._budget,
            deadline=self._deadline,
            stalled=self._stalled,
        )

    # -- reporting chunks ----------------------------------------------------------

    def answer(self) -> None:
        """An answer chunk arrived: content, a refusal, or a tool-call delta.

        The first one ends the first-token budget; every one restarts the
        inter-chunk budget. A chunk whose text is empty (the role-only chunk
        most providers open with) is not an answer: report it with
        [`chunk()`][juno_bind_trio.completion.StreamWatchdog.chunk].
        """
        if self._state != "open":
            self._not_open("answer")
            return
        now = self._clock()
        # At or past the deadline the stall has already happened, whether or
        # not the scope has delivered it yet: moving the deadline now would let
        # a chunk that arrived too late rescue the stream, and would relabel the
        # stall that is already on its way.
        if now >= self._deadline:
            self._overdue()
            return
        self._answer_chunks += 1
        self._last_chunk_at = now
        if self._first_answer_at is None:
            self._first_answer_at = now
            self._budget = _INTER
        deadline = now + self._inter_chunk_timeout
        if self._deadline <= deadline <= self._scope_deadline:
            # _move_to's common case, inline (once per chunk): the scope,
            # filed late, already covers the new deadline.
            self._deadline = deadline
        else:
            self._move_to(deadline)

    def reasoning(self) -> None:
        """A reasoning chunk arrived: a sign of life, not the first token.

        Restarts the inter-chunk budget; leaves the first-token budget running.
        """
        if self._state != "open":
            self._not_open("reasoning")
            return
        now = self._clock()
        if now >= self._deadline:
            self._overdue()
            return
        self._reasoning_chunks += 1
        self._alive(now)

    def chunk(self) -> None:
        """Any other chunk arrived (role-only, usage, an empty delta).

        The same effect as [`reasoning()`][juno_bind_trio.completion.StreamWatchdog.reasoning],
        counted separately.
        """
        if self._state != "open":
            self._not_open("chunk")
            return
        now = self._clock()
        if now >= self._deadline:
            self._overdue()
            return
        self._other_chunks += 1
        self._alive(now)

    # -- the scope ---------------------------------------------------------------------

    def __enter__(self) -> StreamWatchdog:
        if self._state != "new":
            raise UsageError(
                "StreamWatchdog: a watchdog guards one stream and cannot be entered twice; "
                "create a new one per stream"
            )
        self._clock = clock = _event_loop_clock()
        now = clock()
        self._started_at = now
        self._ttft_deadline = now + self._time_to_first_token
        self._deadline = self._scope_deadline = self._ttft_deadline
        self._slack = min(self._inter_chunk_timeout * _SLACK_FRACTION, _MAX_SLACK)
        self._budget = _TTFT
        scope = anyio.CancelScope(deadline=self._deadline)
        scope.__enter__()
        self._scope = scope
        self._state = "open"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        scope = self._scope
        assert scope is not None
        self._state = "closed"
        swallowed = scope.__exit__(exc_type, exc, tb)
        # The scope only catches a cancellation it caused itself, and the only
        # thing that can cause one is its deadline: so this is a stall. An outer
        # cancellation is not caught here and is already on its way out.
        # The same when a chunk reported after the deadline was the stream's
        # last and the block ended before a checkpoint could deliver the stall.
        if (swallowed and scope.cancelled_caught) or (exc_type is None and self._late):
            self._stalled = True
            timeout = (
                self._time_to_first_token if self._budget == _TTFT else self._inter_chunk_timeout
            )
            raise StreamStallError(self._budget, timeout) from None
        return bool(swallowed)

    async def __aenter__(self) -> StreamWatchdog:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        return self.__exit__(exc_type, exc, tb)

    # -- internals -----------------------------------------------------------------------

    def _alive(self, now: float) -> None:
        self._last_chunk_at = now
        inter = now + self._inter_chunk_timeout
        if self._first_answer_at is not None or inter < self._ttft_deadline:
            self._budget = _INTER
            self._move_to(inter)
        else:
            # The answer has not started and the first-token budget runs out
            # first: a sign of life must not buy the answer more time.
            self._budget = _TTFT
            self._move_to(self._ttft_deadline)

    def _move_to(self, deadline: float) -> None:
        # `deadline` is the true one; the scope may hold a slightly later one
        # (see _SLACK_FRACTION). Moving a cancel scope's deadline costs a few
        # microseconds on both backends (trio re-files it in the run loop's
        # deadline heap, asyncio cancels and re-arms a timer), which on a fast
        # stream was the largest single cost of a chunk; so a chunk that
        # arrives while the scope's deadline is still at or past the true one
        # only records it.
        previous = self._deadline
        if deadline == previous:
            return
        self._deadline = deadline
        if deadline <= self._scope_deadline and deadline >= previous:
            return
        if deadline > previous and deadline - previous < self._slack:
            # Chunks are coming faster than the slack: file the deadline a
            # little late, so that the next several chunks need no move. The
            # scope then fires at most `_slack` after the true deadline, never
            # before it. A sparse stream (gaps of at least the slack) keeps
            # exact deadlines, and so does a burst at one instant.
            scope_deadline = deadline + self._slack
            if self._first_answer_at is None:
                scope_deadline = min(scope_deadline, self._ttft_deadline)
        else:
            scope_deadline = deadline
        self._scope_deadline = scope_deadline
        self._scope.deadline = scope_deadline  # type: ignore[union-attr]

    def _overdue(self) -> None:
        # A chunk came after the true deadline. The stall has happened even if
        # the scope, filed up to the slack late, has not fired yet: pull the
        # scope's deadline back so the next checkpoint delivers it, and let
        # __exit__ report it should the block end before one.
        self._late = True
        if self._scope_deadline > self._deadline:
            self._scope_deadline = self._deadline
            self._scope.deadline = self._deadline  # type: ignore[union-attr]

    def _not_open(self, method: str) -> None:
        if self._state == "new":
            raise UsageError(
                f"StreamWatchdog.{method}() before the watchdog was entered: "
                "report chunks from inside its `with` block"
            )
