"""Runs in memory, each relayed as a numbered event log that any number of readers follow.

[LiveRuns][juno_bind_trio.web.LiveRuns] starts a run of an agent (anything
with ``open_run(prompt, *, run_id=...)``, as
[Agent][juno_bind_trio.agent.Agent] has), reads its events in a task of its
own, and appends each one's wire form to the run's log. Readers (the SSE
endpoint) wait on the log, never on the run: a slow or vanished browser never
holds the run back, and a reconnect replays from any position still kept.

Memory is bounded twice: a run keeps its newest ``max_kept_events`` events
(a reader that fell further behind is resynced from the snapshot instead),
and at most ``max_kept_runs`` ended runs stay in memory. With a run store,
a run no longer in memory is read back from the store.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, final, runtime_checkable

import anyio
import anyio.abc
import attrs

from juno_bind_trio._errors import RunLeasedError, RunLimitError, RunNotFoundError, UsageError
from juno_bind_trio._validate import error_kind
from juno_bind_trio.agent import Deny, RunEndedEvent, agent_in_charge
from juno_bind_trio.completion import ResetEvent, TextEvent, TurnTextView, event_from_wire
from juno_bind_trio.store import ReceiptRecord, RunStore, SqliteRunStore, StoredRun

__all__ = [
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_KEPT_EVENTS",
    "DEFAULT_MAX_KEPT_RUNS",
    "LiveRun",
    "LiveRuns",
    "RunHandle",
    "RunSource",
    "RunStatus",
    "WireEvent",
    "last_turn_calls",
]

DEFAULT_MAX_ACTIVE_RUNS: Final = 8
"""How many runs [LiveRuns][juno_bind_trio.web.LiveRuns] lets run at once."""

DEFAULT_MAX_KEPT_RUNS: Final = 64
"""How many ended runs stay readable before the oldest is forgotten."""

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
_SNAPSHOT_CALL_STATUS: Final[Mapping[str, str]] = {
    "succeeded": "finished",
    "failed": "failed",
    "interrupted": "interrupted",
    "not_run": "not_run",
    "started": "running",
}


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


def last_turn_calls(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of each call of the transcript's last assistant message.

    What the protocol relays settle a turn from when it ends; a call not
    shaped as a function call is left out.
    """
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        calls: list[tuple[str, str, str]] = []
        for wire in message.get("tool_calls") or ():
            if not isinstance(wire, Mapping):
                continue
            call_id = wire.get("id")
            function = wire.get("function")
            if not isinstance(call_id, str) or not isinstance(function, Mapping):
                continue
            arguments = function.get("arguments")
            name = str(function.get("name"))
            calls.append((call_id, name, arguments if isinstance(arguments, str) else ""))
        return calls
    return []


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


def _resumes_durably(source: object) -> bool:
    """Whether *source* keeps its runs in a store and resumes them (an Agent with one):
    a decision then continues the stored run itself, never a copy in memory."""
    return getattr(source, "store", None) is not None and callable(
        getattr(source, "open_resume", None)
    )


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


_ENDED_FOR_GOOD: Final = frozenset(
    {"completed", "max_iterations", "should_stop", "stopped", "suspended", "failed", "cancelled"}
)


def _stored_run(
    run_id: str,
    stored: StoredRun,
    receipts: Sequence[ReceiptRecord],
    now: float,
    pending: Sequence[dict[str, Any]] = (),
) -> LiveRun:
    """A run read back from the store, as far as the store knows it: its saved
    transcript, each assistant message's text as a final turn (turn ``n`` of
    the run is ``"{run_id}:{n}"``, as the loop names it), its tool calls with
    their receipts, and where it stands."""
    record = stored.record
    messages = [dict(m) for m in stored.messages]
    assistants = [m for m in messages if m.get("role") == "assistant"]
    if stored.pending_turn is not None:
        assistants.append(dict(stored.pending_turn))
    turns = [
        {
            "turnId": f"{run_id}:{n}",
            "text": m["content"] if isinstance(m.get("content"), str) else "",
            "final": True,
        }
        for n, m in enumerate(assistants, start=1)
    ]
    answers = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    states = {r.tool_call_id: r.state for r in receipts}
    calls = []
    for message in assistants:
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            call_id = str(call.get("id"))
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            state = states.get(call_id)
            status = _SNAPSHOT_CALL_STATUS.get(state or "") or (
                "finished" if call_id in answers else "not_run"
            )
            calls.append(
                {
                    "toolCallId": call_id,
                    "toolName": function.get("name"),
                    "arguments": function.get("arguments"),
                    "status": status,
                    "content": answers.get(call_id),
                }
            )
    ended = record.status in _ENDED_FOR_GOOD
    expires = record.lease_expires_at
    run = LiveRun(
        run_id=run_id,
        owner=None,
        prompt="",
        status="ended" if ended else "detached",
        reason=record.status if ended else None,
    )
    run._stored = {
        "runId": run_id,
        "status": run.status,
        "reason": run.reason,
        "lastEventId": 0,
        "agent": agent_in_charge(messages),  # None: no handoff, the starting agent speaks
        "turns": turns,
        "toolCalls": calls,
        "transcript": messages,
        "pending": [dict(call) for call in pending],
        "decisions": [],
        "stored": {
            "status": record.status,
            "iteration": record.iteration,
            "leaseExpired": record.status == "running" and (expires is None or expires <= now),
        },
    }
    run._pending = [dict(call) for call in pending]
    return run


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


def _check_store(
    value: RunStore | str | os.PathLike[str] | None,
) -> RunStore | str | os.PathLike[str] | None:
    given: object = value
    if given is None or isinstance(given, RunStore):
        return value
    if isinstance(given, str | os.PathLike) and os.fspath(given) != "":
        return value
    raise TypeError(
        f"LiveRuns: store must be a RunStore, a SQLite file path or None, got {value!r}"
    )


@final
@attrs.define(eq=False)
class LiveRuns:
    """The runs a web view serves: in memory, and on the run store where one is configured.

    ``LiveRuns(agent)``; enter ``async with runs.running():`` (the app's
    lifespan does) to give the runs a task group to live in. Leaving it
    cancels the runs still going, with the loop's guarantees: every tool call
    is answered in the transcript.

    *store*: where the agent keeps its runs (``Agent(store=...)``): a
    [RunStore][juno_bind_trio.store.RunStore] the host opened, or a SQLite
    file's path (opened for reading while ``running()``). By default, the
    agent's own ``store``. A run no longer in memory (ended and forgotten, or
    started before a restart) is then read back from it by
    [find][juno_bind_trio.web.LiveRuns.find].

    *max_kept_events*: how many of its newest events each run keeps for
    reconnecting readers; *max_kept_runs*: how many ended runs stay in memory.
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
    _max_events: int = attrs.field(
        default=DEFAULT_MAX_KEPT_EVENTS,
        validator=_check_limit("max_kept_events"),
        alias="max_kept_events",
        kw_only=True,
    )
    _store_spec: RunStore | str | os.PathLike[str] | None = attrs.field(
        default=None, converter=_check_store, alias="store", kw_only=True, repr=False
    )
    _runs: dict[str, LiveRun] = attrs.field(factory=dict, init=False, repr=False)
    _tasks: anyio.abc.TaskGroup | None = attrs.field(default=None, init=False, repr=False)
    _store: RunStore | None = attrs.field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self._store_spec is None:
            self._store_spec = _check_store(getattr(self._source, "store", None))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LiveRuns]:
        """The lifetime of the runs: runs start inside it, and end with it."""
        if self._tasks is not None:
            raise UsageError("LiveRuns.running(): already running")
        try:
            async with AsyncExitStack() as stack, anyio.create_task_group() as tasks:
                spec = self._store_spec
                if isinstance(spec, RunStore):
                    self._store = spec  # the host opened it and closes it
                elif spec is not None:
                    self._store = await stack.enter_async_context(SqliteRunStore(spec))
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
            self._store = None

    @property
    def active(self) -> int:
        """How many runs have not ended."""
        return sum(1 for run in self._runs.values() if not run.ended)

    @property
    def kept(self) -> int:
        """How many runs are in memory (going, and ended ones not yet forgotten)."""
        return len(self._runs)

    def get(self, run_id: str) -> LiveRun | None:
        """The run with this id in memory, or ``None``."""
        return self._runs.get(run_id)

    async def find(self, run_id: str) -> LiveRun | None:
        """The run with this id: in memory, else read back from the store; or ``None``.

        A run read back from the store is a fresh, ended (or ``"detached"``)
        [LiveRun][juno_bind_trio.web.LiveRun] each time, with the store's
        snapshot and no event log. Only ids this class makes are looked up.
        """
        given: object = run_id
        if not isinstance(given, str):
            raise TypeError(f"LiveRuns.find: run_id must be a str, got {run_id!r}")
        run = self._runs.get(run_id)
        store = self._store
        if run is not None or store is None or _split_run_id(run_id) is None:
            return run
        try:
            stored, receipts = await store.load_with_receipts(run_id)
            waiting = (
                await store.pending_calls(run_id) if stored.record.status == "suspended" else []
            )
        except RunNotFoundError:
            return None
        pending = [call.to_json() for call in waiting]
        return _stored_run(run_id, stored, receipts, store.now(), pending)

    def start(self, prompt: str, *, owner: str) -> LiveRun:
        """Start a run of the agent on *prompt*, owned by *owner*; return it at once.

        Raises [UsageError][juno_bind_trio.UsageError] outside
        [running][juno_bind_trio.web.LiveRuns.running], and
        [RunLimitError][juno_bind_trio.RunLimitError] (a ``UsageError``) when
        ``max_active_runs`` runs are already going: the app answers 429.
        """
        given_prompt: object = prompt
        if not isinstance(given_prompt, str):
            raise TypeError(f"LiveRuns.start: prompt must be a non-empty string, got {prompt!r}")
        if not prompt.strip():
            raise ValueError(f"LiveRuns.start: prompt must be a non-empty string, got {prompt!r}")
        given_owner: object = owner
        if not isinstance(given_owner, str) or not owner:
            raise error_kind(given_owner, str)(
                f"LiveRuns.start: owner must be a non-empty string, got {owner!r}"
            )
        tasks = self._tasks
        if tasks is None:
            raise UsageError("LiveRuns.start: enter `async with runs.running():` first")
        if self.active >= self._max_active:
            raise RunLimitError(
                f"LiveRuns.start: {self._max_active} runs are already going", self._max_active
            )
        self._forget_old()
        run_id = _new_run_id(owner)
        run = LiveRun(run_id=run_id, owner=owner, prompt=prompt, max_events=self._max_events)
        self._runs[run_id] = run
        tasks.start_soon(run._drive, self._source, name=f"live run {run_id[:6]}…")
        return run

    def decide(
        self, run: LiveRun, approvals: Mapping[str, bool | str], *, principal: str
    ) -> LiveRun:
        """Continue *run*, ended ``"suspended"``, with decisions for its waiting calls; return
        the new run (same owner) at once.

        *approvals*: by call id, ``True`` (approve: the call runs once, in the new run),
        ``False`` or a reason (deny: the model reads it as a failure of kind ``"authz"``).
        A call left out stays waiting. *principal*, who decided, is on the new run's
        snapshot (``decisions``).

        With an agent that keeps its runs in a store, the stored run itself goes on,
        under the same id (``Agent.open_resume``): the decisions are written to the
        store with *principal* before the run is claimed, each approved call runs
        once under its receipt, and the store records how the run ends (a run read
        back from the store after a restart is decided the same way). Without one,
        the run goes on in memory, as a new run, from *run*'s transcript.

        :raises UsageError: *run* waits for nothing, or an id it does not wait on
            (named); nothing is started.
        """
        given: object = run
        if not isinstance(given, LiveRun):
            raise TypeError(f"LiveRuns.decide: run must be a LiveRun, got {run!r:.80}")
        waiting = {call["id"]: call for call in run.pending}
        if not waiting:
            raise UsageError(f"LiveRuns.decide: run {run.run_id!r} waits for no decision")
        asked: object = approvals
        if not isinstance(asked, Mapping) or not asked:
            raise error_kind(asked, Mapping)(
                "LiveRuns.decide: approvals must be a non-empty dict of call id -> True, False "
                f"or a reason, got {approvals!r:.80}"
            )
        decided: dict[str, Any] = {}
        record: list[dict[str, Any]] = []
        for key, value in cast("Mapping[object, object]", asked).items():
            call_id = key if isinstance(key, str) else repr(key)
            call = waiting.get(call_id) if isinstance(key, str) else None
            if call is None or call.get("kind") != "approval":
                raise UsageError(
                    f"LiveRuns.decide: no call {call_id!r} of run {run.run_id!r} waits for an "
                    "approval; the waiting calls are: " + ", ".join(sorted(waiting))
                )
            if value is True:
                decided[call_id] = True
            elif value is False or (isinstance(value, str) and value.strip()):
                decided[call_id] = Deny(value if isinstance(value, str) else "denied")
            else:
                raise TypeError(
                    f"LiveRuns.decide: approvals[{call_id!r}] must be True, False or a reason, "
                    f"got {value!r:.80}"
                )
            record.append({"callId": call_id, "approved": value is True, "principal": principal})
        tasks = self._tasks
        if tasks is None:
            raise UsageError("LiveRuns.decide: enter `async with runs.running():` first")
        if self.active >= self._max_active:
            raise RunLimitError(
                f"LiveRuns.decide: {self._max_active} runs are already going", self._max_active
            )
        owner = run.owner if run.owner is not None else principal
        self._forget_old()
        if _resumes_durably(self._source):
            same = LiveRun(
                run_id=run.run_id, owner=run.owner, prompt=run.prompt, max_events=self._max_events
            )
            same._resuming = (decided, principal)
            same._continues = (run, list(run._pending))
            same._decisions = record
            run._pending = []  # decided: a second decision here is refused (409)
            self._runs[run.run_id] = same
            tasks.start_soon(same._drive, self._source, name=f"live run {run.run_id[:6]}…")
            return same
        new = LiveRun(
            run_id=_new_run_id(owner), owner=owner, prompt=run.prompt, max_events=self._max_events
        )
        new._going_on = (run.snapshot()["transcript"], decided)
        new._decisions = record
        run._pending = []  # decided: a second decision of these calls is refused
        self._runs[new.run_id] = new
        tasks.start_soon(new._drive, self._source, name=f"live run {new.run_id[:6]}…")
        return new

    async def refused(self, run: LiveRun) -> Exception | None:
        """Wait until *run* (from `decide`) is under way; the store's refusal of its
        decisions if it never started (the run it continues is put back as it was)."""
        await run._started.wait()
        refusal = run._refusal
        if refusal is not None and run._continues is not None:
            before, pending = run._continues
            before._pending = pending
            self._runs[run.run_id] = before
        return refusal

    def _forget_old(self) -> None:
        ended = [run_id for run_id, run in self._runs.items() if run.ended]
        for run_id in ended[: max(0, len(ended) - self._max_kept + 1)]:
            del self._runs[run_id]
