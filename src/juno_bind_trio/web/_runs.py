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

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final, cast, final

import anyio
import anyio.abc
import attrs

from juno_bind_trio._errors import RunLimitError, RunNotFoundError, UsageError
from juno_bind_trio._validate import error_kind
from juno_bind_trio.agent import Deny
from juno_bind_trio.store import ReceiptRecord, RunStore, SqliteRunStore, StoredRun

from ._live_run import (
    DEFAULT_MAX_KEPT_EVENTS,
    LiveRun,
    RunSource,
    _new_run_id,
    _split_run_id,
)

__all__ = [
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_KEPT_RUNS",
    "LiveRuns",
    "last_turn_calls",
]

DEFAULT_MAX_ACTIVE_RUNS: Final = 8
"""How many runs [LiveRuns][juno_bind_trio.web.LiveRuns] lets run at once."""

DEFAULT_MAX_KEPT_RUNS: Final = 64
"""How many ended runs stay readable before the oldest is forgotten."""

_SNAPSHOT_CALL_STATUS: Final[Mapping[str, str]] = {
    "succeeded": "finished",
    "failed": "failed",
    "interrupted": "interrupted",
    "not_run": "not_run",
    "started": "running",
}


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


def _resumes_durably(source: object) -> bool:
    """Whether *source* keeps its runs in a store and resumes them (an Agent with one):
    a decision then continues the stored run itself, never a copy in memory."""
    return getattr(source, "store", None) is not None and callable(
        getattr(source, "open_resume", None)
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
    their receipts, where it stands, and the agent in charge its record names."""
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
        # The store's record names who speaks (written with each saved transcript): the
        # target of the last handoff, else the agent that started the run.
        "agent": record.agent_in_charge,
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
        # The run goes on under the agent in charge where it stopped: until its own
        # first turn or handoff says so, its snapshot names that agent (not no one).
        before = run.snapshot()
        speaking = before["agent"]
        self._forget_old()
        if _resumes_durably(self._source):
            same = LiveRun(
                run_id=run.run_id, owner=run.owner, prompt=run.prompt, max_events=self._max_events
            )
            same._resuming = (decided, principal)
            same._continues = (run, list(run._pending))
            same._decisions = record
            same._agent = speaking
            run._pending = []  # decided: a second decision here is refused (409)
            self._runs[run.run_id] = same
            tasks.start_soon(same._drive, self._source, name=f"live run {run.run_id[:6]}…")
            return same
        new = LiveRun(
            run_id=_new_run_id(owner), owner=owner, prompt=run.prompt, max_events=self._max_events
        )
        new._going_on = (before["transcript"], decided)
        new._decisions = record
        new._agent = speaking
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
