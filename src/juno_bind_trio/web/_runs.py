"""Runs in memory, each relayed as a numbered event log that any number of readers follow.

[LiveRuns][juno_bind_trio.web.LiveRuns] starts a run of an agent (anything
with ``open_run(prompt, *, run_id=...)``, as
[Agent][juno_bind_trio.agent.Agent] has), reads its events in a task of its
own, and appends each one's wire form to the run's log. Readers (the SSE
endpoint) wait on the log, never on the run: a slow or vanished browser never
holds the run back, and a reconnect replays from any position.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, Literal, Protocol, TypeAlias, final, runtime_checkable

import anyio
import anyio.abc
import attrs

from juno_bind_trio._errors import UsageError
from juno_bind_trio.completion import TurnTextView, event_from_wire

__all__ = [
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_KEPT_RUNS",
    "LiveRun",
    "LiveRuns",
    "RunHandle",
    "RunSource",
    "RunStatus",
    "WireEvent",
]

DEFAULT_MAX_ACTIVE_RUNS: Final = 8
"""How many runs [LiveRuns][juno_bind_trio.web.LiveRuns] lets run at once."""

DEFAULT_MAX_KEPT_RUNS: Final = 64
"""How many ended runs stay readable before the oldest is forgotten."""

RunStatus: TypeAlias = Literal["running", "stopping", "cancelling", "ended"]
"""Where a run is: ``stopping`` / ``cancelling`` once asked, ``ended`` after its last event."""


@runtime_checkable
class WireEvent(Protocol):
    """An event of a run: anything with ``to_wire()`` returning a JSON object with a ``"kind"``."""

    def to_wire(self) -> dict[str, Any]: ...


@runtime_checkable
class RunHandle(Protocol):
    """What [LiveRuns][juno_bind_trio.web.LiveRuns] needs of a run in progress.

    [AgentRun][juno_bind_trio.agent.AgentRun] is one: iterate it for events,
    ``stop()`` softly, ``cancel()`` hard, ``messages`` is the transcript so far.
    """

    @property
    def messages(self) -> Sequence[Mapping[str, Any]]: ...

    def stop(self) -> None: ...

    def cancel(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[WireEvent]: ...


class RunSource(Protocol):
    """What starts runs: [Agent][juno_bind_trio.agent.Agent] is one."""

    def open_run(
        self, prompt: str, *, run_id: str | None = ...
    ) -> AbstractAsyncContextManager[RunHandle]: ...


def _wire_of(event: object) -> dict[str, Any]:
    to_wire = getattr(event, "to_wire", None)
    if to_wire is None:
        raise UsageError(f"LiveRuns: a run yielded {event!r}, which has no to_wire()")
    wire = to_wire()
    if not isinstance(wire, dict) or not isinstance(wire.get("kind"), str):
        raise UsageError(
            f"LiveRuns: {type(event).__name__}.to_wire() must return a dict with a 'kind', "
            f"got {wire!r}"
        )
    return wire


@final
@attrs.define(eq=False)
class LiveRun:
    """One run as the web view serves it: its event log, its turns' text, its status.

    The log is append-only; event *n* (counting from 1) is served with SSE
    ``id: n``, so a reader that saw up to *n* resumes at *n + 1*.
    """

    run_id: str
    owner: str
    prompt: str
    status: RunStatus = "running"
    reason: str | None = None
    _events: list[dict[str, Any]] = attrs.field(factory=list, init=False, repr=False)
    _views: dict[str, TurnTextView] = attrs.field(factory=dict, init=False, repr=False)
    _tool_calls: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False, repr=False)
    _changed: anyio.Event = attrs.field(factory=anyio.Event, init=False, repr=False)
    _handle: RunHandle | None = attrs.field(default=None, init=False, repr=False)
    _transcript: list[dict[str, Any]] = attrs.field(factory=list, init=False, repr=False)
    _stop_requested: bool = attrs.field(default=False, init=False, repr=False)
    _cancel_requested: bool = attrs.field(default=False, init=False, repr=False)

    @property
    def last_event_id(self) -> int:
        """The id of the newest event (0 before the first)."""
        return len(self._events)

    @property
    def ended(self) -> bool:
        """The run is over and its log complete."""
        return self.status == "ended"

    def events_after(self, last_event_id: int) -> list[tuple[int, dict[str, Any]]]:
        """The events a reader that saw up to *last_event_id* has not seen, with their ids."""
        return [
            (index + 1, event)
            for index, event in enumerate(self._events[last_event_id:], start=last_event_id)
        ]

    async def wait_for_more(self, last_event_id: int) -> None:
        """Return once there is an event after *last_event_id*, or the run has ended."""
        while len(self._events) <= last_event_id and not self.ended:
            await self._changed.wait()

    def snapshot(self) -> dict[str, Any]:
        """What a client resyncs from: every turn's text, the tool calls, the transcript."""
        turns = []
        for turn_id, view in self._views.items():
            turn: dict[str, Any] = {"turnId": turn_id, "text": view.text, "final": view.final}
            if not view.final:
                turn |= {"epoch": view.epoch, "lastSeq": view.last_seq}
            turns.append(turn)
        handle = self._handle
        transcript = (
            [dict(m) for m in handle.messages]
            if handle is not None and not self.ended
            else self._transcript
        )
        return {
            "runId": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "lastEventId": self.last_event_id,
            "turns": turns,
            "toolCalls": list(self._tool_calls.values()),
            "transcript": transcript,
        }

    # -- the run's side ----------------------------------------------------------------

    def _append(self, wire: dict[str, Any]) -> None:
        self._events.append(wire)
        kind = wire["kind"]
        if kind in ("text", "reset"):
            event = event_from_wire(wire)
            view = self._views.get(event.turn_id)
            if view is None:
                # The server reads the run in order: nothing is ever held.
                view = self._views[event.turn_id] = TurnTextView(event.turn_id)
            view.apply(event)
        elif kind == "turn_ended":
            turn_id = wire.get("turnId")
            if isinstance(turn_id, str) and turn_id:
                view = self._views.get(turn_id)
                if view is None:
                    view = self._views[turn_id] = TurnTextView(turn_id)
                content = wire.get("content")
                view.finalize(content if isinstance(content, str) else "")
        elif kind == "tool_call_started":
            call_id = str(wire.get("toolCallId"))
            self._tool_calls[call_id] = {
                "toolCallId": call_id,
                "toolName": wire.get("toolName"),
                "arguments": wire.get("arguments"),
                "status": "running",
            }
        elif kind == "tool_call_ended":
            call_id = str(wire.get("toolCallId"))
            call = self._tool_calls.get(call_id)
            if call is None:  # answered without starting (not_run): arguments from the ask
                call = self._tool_calls[call_id] = {
                    "toolCallId": call_id,
                    "toolName": wire.get("toolName"),
                    "arguments": self._asked_arguments(call_id),
                }
            call["status"] = wire.get("status")
            call["content"] = wire.get("content")
        elif kind == "run_ended":
            reason = wire.get("reason")
            self.reason = reason if isinstance(reason, str) else None
        self._wake()

    def _asked_arguments(self, call_id: str) -> object:
        handle = self._handle
        for message in reversed(handle.messages if handle is not None else ()):
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping) and call.get("id") == call_id:
                    function = call.get("function")
                    return function.get("arguments") if isinstance(function, Mapping) else None
        return None

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _status(self, status: RunStatus) -> None:
        self.status = status
        self._append({"kind": "run_status", "runId": self.run_id, "status": status})

    def request_stop(self) -> bool:
        """Soft stop: no new tool call starts, calls in flight finish. Whether it was news."""
        if self.ended or self._stop_requested or self._cancel_requested:
            return False
        self._stop_requested = True
        self._status("stopping")
        if self._handle is not None:
            self._handle.stop()
        return True

    def request_cancel(self) -> bool:
        """Hard cancel of the run's scope. Whether it was news."""
        if self.ended or self._cancel_requested:
            return False
        self._cancel_requested = True
        self._status("cancelling")
        if self._handle is not None:
            self._handle.cancel()
        return True

    async def _drive(self, source: RunSource) -> None:
        try:
            async with source.open_run(self.prompt, run_id=self.run_id) as handle:
                self._handle = handle
                if self._cancel_requested:
                    handle.cancel()
                elif self._stop_requested:
                    handle.stop()
                async for event in handle:
                    self._append(_wire_of(event))
                self._transcript = [dict(m) for m in handle.messages]
        except Exception as exc:  # the run's own failure: shown, not raised into the server
            if self._handle is not None:
                self._transcript = [dict(m) for m in self._handle.messages]
            if self.reason is None:
                self._append(
                    {
                        "kind": "run_ended",
                        "runId": self.run_id,
                        "reason": "failed",
                        # The type only: an error's text may carry what the
                        # host would not show (endpoints, internal names).
                        "error": type(exc).__name__,
                    }
                )
        finally:
            self._handle = None
            for view in self._views.values():
                if not view.final:
                    view.finalize()  # what the reader was shown is what it keeps
            if self.reason is None:
                self.reason = "cancelled"
                self._events.append(
                    {"kind": "run_ended", "runId": self.run_id, "reason": "cancelled"}
                )
            self.status = "ended"
            self._events.append({"kind": "run_status", "runId": self.run_id, "status": "ended"})
            self._wake()


def _check_limit(name: str) -> Any:
    def check(_self: object, _attr: object, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"LiveRuns: {name} must be a positive integer, got {value!r}")
        if value < 1:
            raise ValueError(f"LiveRuns: {name} must be a positive integer, got {value!r}")

    return check


def _check_source(_self: object, _attr: object, value: Any) -> None:
    if not callable(getattr(value, "open_run", None)):
        raise TypeError(f"LiveRuns: agent must have an open_run() method (an Agent), got {value!r}")


@final
@attrs.define(eq=False)
class LiveRuns:
    """The runs a web view serves, in memory.

    ``LiveRuns(agent)``; enter ``async with runs.running():`` (the app's
    lifespan does) to give the runs a task group to live in. Leaving it
    cancels the runs still going, with the loop's guarantees: every tool call
    is answered in the transcript.
    """

    _source: RunSource = attrs.field(validator=_check_source, alias="agent")
    _max_active: int = attrs.field(
        default=DEFAULT_MAX_ACTIVE_RUNS,
        validator=_check_limit("max_active_runs"),
        alias="max_active_runs",
        kw_only=True,
    )
    _max_kept: int = attrs.field(
        default=DEFAULT_MAX_KEPT_RUNS,
        validator=_check_limit("max_kept_runs"),
        alias="max_kept_runs",
        kw_only=True,
    )
    _runs: dict[str, LiveRun] = attrs.field(factory=dict, init=False, repr=False)
    _tasks: anyio.abc.TaskGroup | None = attrs.field(default=None, init=False, repr=False)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LiveRuns]:
        """The lifetime of the runs: runs start inside it, and end with it."""
        if self._tasks is not None:
            raise UsageError("LiveRuns.running(): already running")
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                try:
                    yield self
                finally:
                    for run in self._runs.values():
                        run.request_cancel()
                    # And cancel their tasks outright: a run source that ignores
                    # cancel() must not hold the server's shutdown.
                    tasks.cancel_scope.cancel()
        finally:
            self._tasks = None

    @property
    def active(self) -> int:
        """How many runs have not ended."""
        return sum(1 for run in self._runs.values() if not run.ended)

    def get(self, run_id: str) -> LiveRun | None:
        """The run with this id, or ``None``."""
        return self._runs.get(run_id)

    def start(self, prompt: str, *, owner: str) -> LiveRun:
        """Start a run of the agent on *prompt*, owned by *owner*; return it at once.

        Raises [UsageError][juno_bind_trio.UsageError] outside
        [running][juno_bind_trio.web.LiveRuns.running], and ``RuntimeError``
        (as [UsageError][juno_bind_trio.UsageError]) when ``max_active_runs``
        runs are already going: the caller answers 429.
        """
        given_prompt: object = prompt
        if not isinstance(given_prompt, str):
            raise TypeError(f"LiveRuns.start: prompt must be a non-empty string, got {prompt!r}")
        if not prompt.strip():
            raise ValueError(f"LiveRuns.start: prompt must be a non-empty string, got {prompt!r}")
        given_owner: object = owner
        if not isinstance(given_owner, str) or not owner:
            raise TypeError(f"LiveRuns.start: owner must be a non-empty string, got {owner!r}")
        tasks = self._tasks
        if tasks is None:
            raise UsageError("LiveRuns.start: enter `async with runs.running():` first")
        if self.active >= self._max_active:
            raise UsageError(f"LiveRuns.start: {self._max_active} runs are already going")
        self._forget_old()
        run_id = secrets.token_urlsafe(18)  # 144 random bits: unguessable, URL-safe
        run = LiveRun(run_id=run_id, owner=owner, prompt=prompt)
        self._runs[run_id] = run
        tasks.start_soon(run._drive, self._source, name=f"live run {run_id[:6]}…")
        return run

    def _forget_old(self) -> None:
        ended = [run_id for run_id, run in self._runs.items() if run.ended]
        for run_id in ended[: max(0, len(ended) - self._max_kept + 1)]:
            del self._runs[run_id]
