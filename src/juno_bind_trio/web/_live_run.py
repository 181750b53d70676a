"""One run as the web view serves it: its event log, its snapshot, what it needs of a run.

A run's id is a random token and a digest binding it to its owner, so a run
read back from the store is still served only to the principal that started it.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, final, runtime_checkable

import anyio
import attrs

from juno_bind_trio._errors import RunLeasedError, UsageError
from juno_bind_trio.agent import RunEndedEvent
from juno_bind_trio.completion import ResetEvent, TextEvent, TurnTextView, event_from_wire

__all__ = [
    "DEFAULT_MAX_KEPT_EVENTS",
    "LiveRun",
    "RunHandle",
    "RunSource",
    "RunStatus",
    "WireEvent",
]

DEFAULT_MAX_KEPT_EVENTS: Final = 4096
"""How many of its newest events a run keeps for readers that reconnect."""


RunStatus: TypeAlias = Literal["running", "stopping", "cancelling", "ended", "detached"]
"""Where a run is: ``stopping`` / ``cancelling`` once asked, ``ended`` after its last event.

``detached``: a run read back from the run store that has not ended there, but
that this process does not run (its worker is another process, or died; a
store worker resumes it once its lease expires).
"""


_TOKEN = re.compile(r"[A-Za-z0-9_-]{24}")
_TAG = re.compile(r"[A-Za-z0-9_-]{22}")


def _owner_tag(token: str, owner: str) -> str:
    """A digest binding a run id's random part to its owner (the principal)."""
    digest = hashlib.sha256(
        b"juno-bind-trio web run owner\x00"
        + token.encode()
        + b"\x00"
        + owner.encode("utf-8", "surrogatepass")
    ).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def _new_run_id(owner: str) -> str:
    token = secrets.token_urlsafe(18)  # 144 random bits: unguessable, URL-safe
    return f"{token}.{_owner_tag(token, owner)}"


def _split_run_id(run_id: str) -> tuple[str, str] | None:
    token, dot, tag = run_id.partition(".")
    if not dot or not _TOKEN.fullmatch(token) or not _TAG.fullmatch(tag):
        return None
    return token, tag


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


class _DecidingSource(Protocol):
    """A source that also continues a suspended run in memory, with decisions (Agent)."""

    def open_run(
        self,
        prompt: None,
        *,
        run_id: str | None = ...,
        message_history: Sequence[Mapping[str, Any]] | None = ...,
        approvals: Mapping[str, Any] | None = ...,
    ) -> AbstractAsyncContextManager[RunHandle]: ...


class _ResumingSource(Protocol):
    """A source that continues a stored run with decisions, streaming it (Agent with a store)."""

    def open_resume(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, Any] | None = ...,
        principal: str | None = ...,
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
    ``id: n``, so a reader that saw up to *n* resumes at *n + 1*. Only the
    newest events are kept (``max_kept_events`` of
    [LiveRuns][juno_bind_trio.web.LiveRuns]): a reader that saw less than
    the kept window is resynced from the [snapshot][juno_bind_trio.web.LiveRun.snapshot].

    *owner* is the principal that started the run; ``None`` for a run read
    back from the run store, whose id carries a digest of its owner instead
    (see [owned_by][juno_bind_trio.web.LiveRun.owned_by]).
    """

    run_id: str
    owner: str | None
    prompt: str
    status: RunStatus = "running"
    reason: str | None = None
    _max_events: int = attrs.field(default=DEFAULT_MAX_KEPT_EVENTS, alias="max_events", repr=False)
    _events: deque[dict[str, Any]] = attrs.field(factory=deque, init=False, repr=False)
    _dropped: int = attrs.field(default=0, init=False, repr=False)
    _stored: dict[str, Any] | None = attrs.field(default=None, init=False, repr=False)
    _views: dict[str, TurnTextView] = attrs.field(factory=dict, init=False, repr=False)
    _tool_calls: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False, repr=False)
    _changed: anyio.Event = attrs.field(factory=anyio.Event, init=False, repr=False)
    _handle: RunHandle | None = attrs.field(default=None, init=False, repr=False)
    _transcript: list[dict[str, Any]] = attrs.field(factory=list, init=False, repr=False)
    _stop_requested: bool = attrs.field(default=False, init=False, repr=False)
    _cancel_requested: bool = attrs.field(default=False, init=False, repr=False)
    # #31: the calls a suspended run left waiting for a decision (PendingToolCall.to_json),
    # and, for a run continuing one, what it continues and the decisions it was given.
    _pending: list[dict[str, Any]] = attrs.field(factory=list, init=False, repr=False)
    _going_on: tuple[list[dict[str, Any]], dict[str, Any]] | None = attrs.field(
        default=None, init=False, repr=False
    )
    _decisions: list[dict[str, Any]] = attrs.field(factory=list, init=False, repr=False)
    # #32: the agent speaking (its turns' ``agent``, a handoff's ``toAgent``), and each
    # turn's, for a client that resyncs from the snapshot after a handoff.
    _agent: str | None = attrs.field(default=None, init=False, repr=False)
    _turn_agents: dict[str, str] = attrs.field(factory=dict, init=False, repr=False)
    # A stored run continued by its store's resume: the decisions, and who made them.
    _resuming: tuple[dict[str, Any], str] | None = attrs.field(default=None, init=False, repr=False)
    # Set once the run is under way or has ended; what refused a stored resume's
    # decisions before it started (the store's UsageError / RunLeasedError), and the
    # run it was to continue, which stays as it was (see ``LiveRuns.refused``).
    _started: anyio.Event = attrs.field(factory=anyio.Event, init=False, repr=False)
    _refusal: Exception | None = attrs.field(default=None, init=False, repr=False)
    _continues: tuple[LiveRun, list[dict[str, Any]]] | None = attrs.field(
        default=None, init=False, repr=False
    )

    @property
    def last_event_id(self) -> int:
        """The id of the newest event (0 before the first)."""
        return self._dropped + len(self._events)

    @property
    def kept_events(self) -> int:
        """How many events the log holds now (at most its bound)."""
        return len(self._events)

    @property
    def ended(self) -> bool:
        """The run is over here: its log is complete (or it was read back from the store)."""
        return self.status in ("ended", "detached")

    @property
    def stored(self) -> bool:
        """The run was read back from the run store: it has a snapshot and no event log."""
        return self._stored is not None

    def owned_by(self, principal: str) -> bool:
        """Whether *principal* started this run."""
        if self.owner is not None:
            return self.owner == principal
        split = _split_run_id(self.run_id)
        return split is not None and secrets.compare_digest(
            split[1], _owner_tag(split[0], principal)
        )

    def missed(self, last_event_id: int) -> bool:
        """Whether events after *last_event_id* were dropped from the log (resync instead)."""
        return self._stored is not None or last_event_id < self._dropped

    def events_after(self, last_event_id: int) -> list[tuple[int, dict[str, Any]]]:
        """The kept events a reader that saw up to *last_event_id* has not seen, with their ids."""
        start = max(last_event_id, self._dropped)
        return [
            (index + 1, self._events[index - self._dropped])
            for index in range(start, self.last_event_id)
        ]

    async def wait_for_more(self, last_event_id: int) -> None:
        """Return once there is an event after *last_event_id*, or the run has ended."""
        while self.last_event_id <= last_event_id and not self.ended:
            await self._changed.wait()

    def snapshot(self) -> dict[str, Any]:
        """What a client resyncs from: every turn's text, the tool calls, the transcript.

        Taken at event ``lastEventId``: the events after it continue from it.
        """
        if self._stored is not None:
            return dict(self._stored)
        turns = []
        for turn_id, view in self._views.items():
            turn: dict[str, Any] = {"turnId": turn_id, "text": view.text, "final": view.final}
            if not view.final:
                turn |= {"epoch": view.epoch, "lastSeq": view.last_seq}
            if turn_id in self._turn_agents:
                turn["agent"] = self._turn_agents[turn_id]
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
            "agent": self._agent,
            "turns": turns,
            "toolCalls": list(self._tool_calls.values()),
            "transcript": transcript,
            "pending": [dict(call) for call in self._pending],
            "decisions": [dict(decision) for decision in self._decisions],
        }

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The calls this run, ended ``"suspended"``, left waiting for a decision."""
        return [dict(call) for call in self._pending] if self.ended else []

    # -- the run's side ----------------------------------------------------------------

    def _push(self, wire: dict[str, Any]) -> None:
        self._events.append(wire)
        if len(self._events) > self._max_events:
            self._events.popleft()
            self._dropped += 1

    def _view(self, turn_id: str) -> TurnTextView:
        """The turn's one view, made on its first event."""
        view = self._views.get(turn_id)
        if view is None:
            # The server reads the run in order: nothing is ever held.
            view = self._views[turn_id] = TurnTextView(turn_id)
        return view

    def _apply(self, event: object) -> None:
        """Apply one typed event of the run to the views, then log its wire form once.

        Text and resets go to their turn's view as the objects they are: the
        wire form is made once, for the log the readers are served from.
        """
        cls = event.__class__
        if cls is TextEvent or cls is ResetEvent:
            typed = cast("TextEvent | ResetEvent", event)
            self._view(typed.turn_id).apply(typed)
        self._append(_wire_of(event), typed=cls is TextEvent or cls is ResetEvent)

    def _append(self, wire: dict[str, Any], *, typed: bool = False) -> None:
        self._push(wire)
        kind = wire["kind"]
        if kind in ("text", "reset"):
            if not typed:  # a run source's own event of that kind: read from its wire form
                event = event_from_wire(wire)
                self._view(event.turn_id).apply(event)
        elif kind == "turn_ended":
            turn_id = wire.get("turnId")
            if isinstance(turn_id, str) and turn_id:
                content = wire.get("content")
                self._view(turn_id).finalize(content if isinstance(content, str) else "")
                agent = wire.get("agent")
                if isinstance(agent, str):
                    self._agent = self._turn_agents[turn_id] = agent
        elif kind == "handoff":
            agent = wire.get("toAgent")
            self._agent = agent if isinstance(agent, str) else self._agent
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

    def _record_pending(self, handle: RunHandle) -> None:
        result = getattr(handle, "result", None)
        waiting = getattr(result, "pending", ())
        calls = [call.to_json() for call in waiting if callable(getattr(call, "to_json", None))]
        if calls:
            self._pending = calls
            self._append({"kind": "pending", "runId": self.run_id, "calls": calls})

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

    def _open(self, source: RunSource) -> AbstractAsyncContextManager[RunHandle]:
        resuming = self._resuming
        if resuming is not None:
            # The stored run itself goes on (the agent's resume): decisions written to
            # the store first, each approved call run once under its receipt.
            decided, principal = resuming
            return cast("_ResumingSource", source).open_resume(
                self.run_id, approvals=decided, principal=principal
            )
        going_on = self._going_on
        if going_on is None:
            return source.open_run(self.prompt, run_id=self.run_id)
        # A run continuing a suspended one in memory: its transcript, the decisions.
        history, approvals = going_on
        deciding = cast("_DecidingSource", source)
        return deciding.open_run(
            None, run_id=self.run_id, message_history=history, approvals=approvals
        )

    async def _drive(self, source: RunSource) -> None:
        try:
            async with self._open(source) as handle:
                self._handle = handle
                if self._cancel_requested:
                    handle.cancel()
                elif self._stop_requested:
                    handle.stop()
                async for event in handle:
                    # Under way: a stored resume's first event other than its end
                    # comes after its decisions were written and the run claimed
                    # (a refusal ends it at once, and raises what refused).
                    if event.__class__ is not RunEndedEvent:
                        self._started.set()
                    self._apply(event)
                self._transcript = [dict(m) for m in handle.messages]
                self._record_pending(handle)
        except (UsageError, RunLeasedError) as exc:
            if self._resuming is None or self._started.is_set():
                self._failed(exc)
            else:
                # The store refused the decisions before the run started (a call
                # settled by another process, the run leased by another worker):
                # nothing was written, nothing ran; the endpoint answers 409.
                self._refusal = exc
        except Exception as exc:  # the run's own failure: shown, not raised into the server
            self._failed(exc)
        finally:
            self._handle = None
            self._started.set()
            for view in self._views.values():
                if not view.final:
                    view.finalize()  # what the reader was shown is what it keeps
            if self.reason is None:
                self.reason = "cancelled"
                self._push({"kind": "run_ended", "runId": self.run_id, "reason": "cancelled"})
            self.status = "ended"
            self._push({"kind": "run_status", "runId": self.run_id, "status": "ended"})
            self._wake()

    def _failed(self, exc: Exception) -> None:
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
