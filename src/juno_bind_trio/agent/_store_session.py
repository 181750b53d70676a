"""A run kept in a run store: a [RunSession][juno_bind_trio.agent.RunSession] on ``store``'s API.

``Agent(..., store=...)`` runs every run in a
[StoreSession][juno_bind_trio.agent.StoreSession]: the run is created in
the store (or, resumed, loaded and healed), claimed under a lease by
[open_durable_run][juno_bind_trio.store.open_durable_run], and its loop's
ports are the [DurableRun][juno_bind_trio.store.DurableRun]'s. Nothing here
reaches into the store's private names, and the store knows nothing of the
agent.

A run on a conversation (``Agent.run(prompt, conversation=...)``) takes the
conversation's hold before the run is created, starts from its history, and
at its end writes its transcript back to it under the run's lease
([RunStore.append_conversation][juno_bind_trio.store.RunStore.append_conversation]);
a run that fails or is cancelled gives the hold up and leaves the
conversation as it was.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, final

import anyio

from juno_bind_trio._errors import ConversationBusy, LeaseLostError, UsageError
from juno_bind_trio.loop import LoopResult, RunStats
from juno_bind_trio.run import root_chain
from juno_bind_trio.store import (
    DurableRun,
    RunStore,
    SqliteRunStore,
    open_durable_run,
)

from ._approval_placeholders import waiting_run
from ._approvals import ApprovalGate

if TYPE_CHECKING:
    from juno_bind_trio.loop import LoopEndReason, LoopState, ToolCallOutcome
    from juno_bind_trio.run import (
        ChainRef,
        EffectResumability,
        StopSignal,
        ToolCall,
        ToolCallLike,
    )

    from ._session import ModelPort, ToolPort

    # What a store session shows a resumed open turn's never-started calls (the
    # store's own screen): an outcome answers the call, None lets it be dispatched.
    Screen = Callable[[ToolCall], Awaitable[ToolCallOutcome | None]]

__all__ = [
    "StoreSession",
    "StoreSpec",
    "check_store",
    "continue_in_conversation",
    "conversation_waiting_run",
]

StoreSpec = str | os.PathLike[str] | RunStore
"""What ``Agent(store=...)`` takes: a SQLite file's path, or an open RunStore."""


def check_store(owner: str, store: object) -> StoreSpec | None:
    """Refuse, at construction, a ``store=`` that is not a path or a RunStore."""
    if store is None or isinstance(store, RunStore):
        return store
    if isinstance(store, str | os.PathLike) and os.fspath(store) != "":
        return store
    raise TypeError(f"{owner}: store must be a SQLite file path, a RunStore or None, got {store!r}")


@asynccontextmanager
async def _opened(store: StoreSpec) -> AsyncIterator[RunStore]:
    if isinstance(store, RunStore):
        yield store  # the host opened it and closes it
        return
    async with SqliteRunStore(store) as opened:
        yield opened


async def conversation_waiting_run(store: StoreSpec, conversation: str) -> str | None:
    """The run whose calls wait for a decision at the end of *conversation*, or ``None``.

    ``Agent.run(conversation=..., approvals=...)`` continues that run (durably, as
    ``Agent.resume`` does), not a copy of it: its waiting calls' placeholders,
    the last messages of the conversation, name it.
    """
    async with _opened(store) as opened:
        history = await opened.conversation_messages(conversation)
    return waiting_run(history)


async def continue_in_conversation(core: Any, owner: str = "Agent.run") -> None:
    """Decisions on a conversation: the run continued is the one whose calls wait at the
    conversation's end, resumed from the store (its decisions written first, each
    approved call run under its receipt), not a new run copying it.

    *core* is the run (``_run._RunCore``): made, here, the resume of that run. Read
    once: ``open_run`` reads it as its block is entered, so the handle's ``run_id`` is
    the continued run's from the start, and the run does not read it again.
    """
    conversation = core.conversation
    if conversation is None or core.conversation_read:
        return
    if not (core.gate.decisions or not core.prompted):
        return  # a prompt and no decisions: a new run on the conversation
    store = core.settings.store
    assert store is not None
    found = await conversation_waiting_run(store, conversation)
    core.conversation_read = True
    if found is None:
        return  # nothing waits: the decisions are refused naming their ids (with_history)
    if core.prompted:
        raise UsageError(
            f"{owner}: run {found!r} of conversation {conversation!r} waits for these "
            "decisions; continue it with them and no prompt "
            f"(agent.run(conversation={conversation!r}, approvals=...)), then send the prompt"
        )
    core.run_id = found
    core.chain = root_chain(found, agent=core.settings.name)
    core.resuming = True
    core.conversation = None  # the resumed run takes its conversation's hold again


@final
class StoreSession:
    """A run kept in a [RunStore][juno_bind_trio.store.RunStore], claimed under a lease.

    Made by [StoreSession.open][juno_bind_trio.agent.StoreSession.open], on a
    [DurableRun][juno_bind_trio.store.DurableRun]: the transcript is the
    stored one (healed), the open turn is answered by receipt, the model's
    tool-calling answers and each call's receipt are written before any tool
    runs, every completed iteration is saved, and the stop fires when the
    lease is lost.
    """

    __slots__ = ("_conversation", "_gate", "_resumed", "_run", "_screen", "_store")

    def __init__(
        self,
        run: DurableRun,
        *,
        resumed: bool,
        gate: ApprovalGate | None = None,
        store: RunStore | None = None,
        conversation: str | None = None,
        screen: Screen | None = None,
    ) -> None:
        if not isinstance(run, DurableRun):
            raise TypeError(f"StoreSession: run must be a DurableRun, got {run!r:.80}")
        if not isinstance(resumed, bool):
            raise TypeError(f"StoreSession: resumed must be a bool, got {resumed!r:.80}")
        if gate is not None and not isinstance(gate, ApprovalGate):
            raise TypeError(f"StoreSession: gate must be an ApprovalGate, got {gate!r:.80}")
        if conversation is not None and not isinstance(store, RunStore):
            raise TypeError(
                f"StoreSession: a run on a conversation needs its RunStore, got {store!r:.80}"
            )
        self._run = run
        self._resumed = resumed
        self._gate = gate
        self._store = store
        self._conversation = conversation
        if screen is not None and not callable(screen):
            raise TypeError(f"StoreSession: screen must be an async function, got {screen!r:.80}")
        self._screen = screen

    def __repr__(self) -> str:
        return f"<StoreSession {self._run!r}>"

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        store: StoreSpec,
        *,
        run_id: str,
        messages: Sequence[dict[str, Any]],
        chain: ChainRef,
        agent: str | None,
        resume: bool,
        owner: str,
        lease_ttl: float,
        resumability: Callable[[str], EffectResumability] | None = None,
        uses_idempotency_key: Callable[[str], bool] | None = None,
        gate: ApprovalGate | None = None,
        conversation: str | None = None,
        with_history: Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]
        | None = None,
        screen: Screen | None = None,
    ) -> AsyncIterator[StoreSession]:
        """Open *store* (a path: a SQLite file, closed again after), create the run in it
        unless *resume*, claim it as *owner*, and yield its session.

        *gate*: the run's approval gate. Its clock becomes the store's (a
        deadline is in it). On a resume, the decisions it was given are
        written to the store first, before the claim (so they hold even if
        this worker never gets the run, or dies in it), and the decisions
        stored for the run's waiting calls are read into it with the run.

        *conversation*: the run answers in that conversation: its hold is taken
        first ([ConversationBusy][juno_bind_trio.ConversationBusy] if another run
        has it), and the run's first transcript is ``await with_history(history)``. A
        resumed run of a conversation takes its hold again.

        *screen*: ``async (call) -> ToolCallOutcome | None``, shown each call of a
        resumed run's open turn that never started, before the approval gate and
        before its receipt: an outcome answers the call (no receipt is written, the
        call never runs), ``None`` lets it go on. The agent's tool guards refuse
        there.

        Leaving the block normally after the lease was lost raises
        [LeaseLostError][juno_bind_trio.LeaseLostError]: what the run did after
        that was not saved, so it must not look finished.
        """
        async with _opened(store) as opened:
            if gate is not None:
                gate.set_clock(opened.now)
            held: str | None = None
            try:
                if not resume:
                    first = list(messages)
                    if conversation is not None:
                        history = await opened.claim_conversation(
                            conversation, run_id=run_id, ttl=lease_ttl
                        )
                        held = conversation
                        if with_history is not None:
                            first = await with_history(history)
                    await opened.create_run(
                        run_id, messages=first, chain=chain, agent=agent, conversation_id=held
                    )
                elif gate is not None and gate.decisions:
                    await _decide(opened, run_id, gate, owner)
                async with open_durable_run(
                    opened,
                    run_id,
                    owner=owner,
                    lease_ttl=lease_ttl,
                    resumability=resumability,
                    uses_idempotency_key=uses_idempotency_key,
                ) as run:
                    if resume and run.conversation_id is not None:
                        held = await _hold_again(opened, run, lease_ttl)
                    if gate is not None and run.open_turn is not None:
                        loaded = run.waiting_calls
                        gate.adopt(
                            [r.call for r in loaded],
                            {r.call.id: r.decision for r in loaded if r.decision is not None},
                        )
                    yield cls(
                        run,
                        resumed=resume,
                        gate=gate,
                        store=opened,
                        conversation=held,
                        screen=screen,
                    )
            except BaseException:
                if held is not None:
                    # The conversation stays as it was; the next run may take it now.
                    with anyio.CancelScope(shield=True), suppress(Exception):
                        await opened.release_conversation(held, run_id=run_id)
                raise
            _check_kept(run.lost, run_id, owner)

    @property
    def run(self) -> DurableRun:
        """The claimed run underneath."""
        return self._run

    @property
    def state(self) -> LoopState:
        """The stored transcript, healed."""
        return self._run.state

    @property
    def chain(self) -> ChainRef:
        """The run's lineage, as stored."""
        return self._run.chain

    @property
    def resumed(self) -> bool:
        """Whether the run was loaded to continue (``Agent.resume``) rather than created."""
        return self._resumed

    @property
    def open_turn_iteration(self) -> int | None:
        """The iteration of the turn a crash left open (its calls' receipts are under it)."""
        return self._run.open_turn_iteration

    async def answer_open_turn(
        self,
        run_tool_call: ToolPort,
        *,
        per_tool_limit: int,
        runs_serially: Callable[[ToolCallLike], bool] | None,
    ) -> LoopResult | None:
        """Answer the open turn by receipt; a run whose answer was stored already ends here."""
        run = self._run
        if run.answered:  # it had ended; a crash lost only its status
            await self.finish("completed")
            last = run.state.messages[-1].get("content")
            return LoopResult(
                reason="completed",
                iterations=0,
                stats=RunStats(),
                content=last if isinstance(last, str) else None,
            )
        gate = self._gate
        await run.finish_open_turn(
            run_tool_call,
            per_tool_limit=per_tool_limit,
            runs_serially=runs_serially,
            screen=_screens(self._screen, gate.check if gate is not None and gate.active else None),
        )
        if run.held:  # a call of the turn still waits: suspended again, the turn open
            await self.finish("suspended")
            return LoopResult(reason="suspended", iterations=0, stats=RunStats(), content=None)
        if gate is not None:
            gate.forget_turn()
        return None

    @property
    def first_iteration(self) -> int:
        """The run's next iteration: the loop continues the stored count."""
        return self._run.first_iteration

    @property
    def stop(self) -> StopSignal | None:
        """Fired when the lease is lost."""
        return self._run.stop

    @property
    def save_session(self) -> Callable[[], Awaitable[None]] | None:
        """Saves the whole transcript as of the iteration."""
        return self._run.save_session

    def wrap_call_model(self, call_model: ModelPort) -> ModelPort:
        """Records a tool-calling answer (the open turn) before any of its calls runs."""
        return self._run.wrap_call_model(call_model)

    def wrap_tool_call(self, run_tool_call: ToolPort) -> ToolPort:
        """Writes each call's receipt before it runs and when it settles."""
        return self._run.wrap_tool_call(run_tool_call)

    @property
    def conversation(self) -> str | None:
        """The conversation the run answers in, or ``None``."""
        return self._conversation

    async def finish(self, reason: LoopEndReason) -> None:
        """Records the run's status and gives the lease up; a run suspended on calls
        waiting for a decision keeps its turn open and the store holds the calls. A run
        on a conversation writes its transcript to it first (the transcript answers
        every call, whatever the reason)."""
        run = self._run
        gate = self._gate
        held = tuple(gate.held) if gate is not None and reason == "suspended" else ()
        conversation = self._conversation
        if conversation is not None and self._store is not None and not run.lost:
            try:
                await self._store.append_conversation(
                    run.lease, conversation_id=conversation, messages=run.state.messages
                )
            except LeaseLostError:
                pass  # the run's own release finds the lease lost, and the run says so
            except ConversationBusy:
                # The run is stored; the conversation could not take it.
                await run.finish(reason, pending=held)
                raise
        await run.finish(reason, pending=held)


def _screens(first: Screen | None, then: Screen | None) -> Screen | None:
    """*first*'s answer for a call, else *then*'s (the run's own check, then the gate's)."""
    if first is None or then is None:
        return first or then

    async def both(call: ToolCall) -> ToolCallOutcome | None:
        answer = await first(call)
        return answer if answer is not None else await then(call)

    return both


async def _hold_again(store: RunStore, run: DurableRun, ttl: float) -> str:
    """A resumed run of a conversation takes its hold again, or is refused (and left as it
    was: its status restored, its lease given back)."""
    conversation = run.conversation_id
    assert conversation is not None
    try:
        await store.claim_conversation(conversation, run_id=run.run_id, ttl=ttl)
    except ConversationBusy:
        before = run.status_before
        await run.finish("running" if before == "pending" else before)
        raise
    return conversation


async def _decide(store: RunStore, run_id: str, gate: ApprovalGate, owner: str) -> None:
    """Write the resume's decisions before the claim: from then on they hold.

    Corrected arguments are validated against the tool first, which needs the
    call's tool: only then are the waiting calls read. The store checks every
    id again under its lock and writes all or nothing.
    """
    if any(d.arguments is not None for d in gate.decisions.values()):
        waiting = {c.id: c for c in await store.pending_calls(run_id)}
        corrected = {i: d for i, d in gate.decisions.items() if d.arguments is not None}
        # Only the corrected ones: the store refuses the rest with its own words.
        check = ApprovalGate(corrected)
        check.tools = gate.tools
        check.check_decisions("Agent.resume", waiting)
        gate.decisions.update(check.decisions)
    await store.decide_calls(run_id, gate.decisions, owner=owner)


def _check_kept(lost: bool, run_id: str, owner: str) -> None:
    """Raise LeaseLostError for a run whose lease was lost: what it did after that
    (an answer, a finished batch) was not saved, so it must not look finished."""
    if lost:
        raise LeaseLostError(
            f"run {run_id!r}: this worker ({owner!r}) lost the run's lease before its work "
            "was saved; the store holds it as of its last saved iteration, not finished. "
            f"Resume it (await agent.resume({run_id!r})): calls that finished are answered "
            "from their receipts, not run again",
            run_id,
        )
