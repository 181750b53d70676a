"""The session seam: what a run starts from and where its progress goes, in memory or on a store.

An agent run is one [ToolLoop][juno_bind_trio.loop.ToolLoop] whatever keeps
it. What differs between a plain run and a durable one is only *where its
state lives*: the transcript it starts from, its lineage, the iteration it
continues at, a stop of its own, what happens around each model call and
each tool call, how an iteration is saved, the turn a crash left open, and
how the run's end is recorded. A [RunSession][juno_bind_trio.agent.RunSession]
is those eight things; the run asks its session for each, in one order, and
never looks behind it:

1. ``state``, ``chain``, ``resumed``: the transcript and lineage to start from;
2. [answer_open_turn][juno_bind_trio.agent.RunSession.answer_open_turn]: the
   calls a crash left unanswered, answered through the run's own dispatcher
   (or the run's end, if it turns out to have ended already);
3. ``first_iteration``: the loop's first turn is the run's iteration this;
4. ``stop``, ``save_session``, ``wrap_call_model``, ``wrap_tool_call``: the
   loop's ports, as the session needs them;
5. [finish][juno_bind_trio.agent.RunSession.finish]: the loop's end reason.

[InMemorySession][juno_bind_trio.agent.InMemorySession] is the plain run:
the state it was given, no open turn, ports unwrapped.
[StoreSession][juno_bind_trio.agent.StoreSession] keeps the run in a
[RunStore][juno_bind_trio.store.RunStore]. Another backing (another
database, a workflow engine) is one more class with these members.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

from juno_bind_trio.loop import LoopState
from juno_bind_trio.run import ChainRef

if TYPE_CHECKING:
    from juno_bind_trio.loop import (
        LoopEndReason,
        LoopResult,
        ModelTurn,
        ModelTurnResult,
        ToolCallOutcome,
    )
    from juno_bind_trio.run import StopSignal, ToolCallLike

__all__ = ["InMemorySession", "ModelPort", "RunSession", "ToolPort"]

ModelPort = Callable[["ModelTurn"], Awaitable["ModelTurnResult"]]
"""A loop's ``call_model`` port: ``async (ModelTurn) -> ModelTurnResult``."""

ToolPort = Callable[["ToolCallLike"], Awaitable["ToolCallOutcome"]]
"""A loop's ``run_tool_call`` port: ``async (call) -> ToolCallOutcome``."""


@runtime_checkable
class RunSession(Protocol):
    """Where one run's state lives while it runs: the seam between an agent run and its backing.

    The run reads these members in the order the module documentation lists,
    once each, and builds its one [ToolLoop][juno_bind_trio.loop.ToolLoop] from
    them; it never reaches behind the session. A session is made for one run
    and used once.
    """

    @property
    def state(self) -> LoopState:
        """The transcript the run starts from (and appends to)."""
        ...

    @property
    def chain(self) -> ChainRef:
        """The run's lineage."""
        ...

    @property
    def resumed(self) -> bool:
        """Whether the run continues an earlier one: its ``new_messages`` start after ``state``."""
        ...

    @property
    def open_turn_iteration(self) -> int | None:
        """The iteration of a turn left with unanswered calls, ``None`` when there is none."""
        ...

    async def answer_open_turn(
        self,
        run_tool_call: ToolPort,
        *,
        per_tool_limit: int,
        runs_serially: Callable[[ToolCallLike], bool] | None,
    ) -> LoopResult | None:
        """Answer the open turn's calls (dispatching through *run_tool_call* those that may
        run) into ``state``; or, for a run that had ended already, end it and return its result
        (no loop runs then). ``None``: go on and run the loop."""
        ...

    @property
    def first_iteration(self) -> int:
        """The run's number for the loop's first model call (read after ``answer_open_turn``)."""
        ...

    @property
    def stop(self) -> StopSignal | None:
        """A soft stop of the session's own (a lost lease), read with the run's; or ``None``."""
        ...

    @property
    def save_session(self) -> Callable[[], Awaitable[None]] | None:
        """The loop's persist port, called at the end of every completed iteration; or ``None``."""
        ...

    def wrap_call_model(self, call_model: ModelPort) -> ModelPort:
        """The loop's ``call_model``: *call_model*, with what the session does around it."""
        ...

    def wrap_tool_call(self, run_tool_call: ToolPort) -> ToolPort:
        """The loop's ``run_tool_call``: *run_tool_call*, with what the session does around it."""
        ...

    async def finish(self, reason: LoopEndReason) -> None:
        """Record how the loop ended; called once, after the loop returned."""
        ...


@final
class InMemorySession:
    """A run kept in memory only: the plain [Agent.run][juno_bind_trio.agent.Agent.run].

    It starts from the transcript it is given, has no open turn, no stop of
    its own and nothing to save, hands the ports on unwrapped, and forgets
    the run when it ends.
    """

    __slots__ = ("_chain", "_state")

    def __init__(self, state: LoopState, chain: ChainRef) -> None:
        if not isinstance(state, LoopState):
            raise TypeError(f"InMemorySession: state must be a LoopState, got {state!r:.80}")
        if not isinstance(chain, ChainRef):
            raise TypeError(f"InMemorySession: chain must be a ChainRef, got {chain!r:.80}")
        self._state = state
        self._chain = chain

    def __repr__(self) -> str:
        return f"<InMemorySession messages={len(self._state.messages)}>"

    @property
    def state(self) -> LoopState:
        """The transcript the run was given."""
        return self._state

    @property
    def chain(self) -> ChainRef:
        """The run's lineage."""
        return self._chain

    @property
    def resumed(self) -> bool:
        """Never: a run in memory starts anew."""
        return False

    @property
    def open_turn_iteration(self) -> int | None:
        """``None``: a run in memory has no open turn."""
        return None

    async def answer_open_turn(
        self,
        run_tool_call: ToolPort,
        *,
        per_tool_limit: int,
        runs_serially: Callable[[ToolCallLike], bool] | None,
    ) -> LoopResult | None:
        """Nothing to answer: returns ``None``."""
        return None

    @property
    def first_iteration(self) -> int:
        """1: the run's first model call."""
        return 1

    @property
    def stop(self) -> StopSignal | None:
        """``None``: only the run's own stop counts."""
        return None

    @property
    def save_session(self) -> Callable[[], Awaitable[None]] | None:
        """``None``: nothing is saved."""
        return None

    def wrap_call_model(self, call_model: ModelPort) -> ModelPort:
        """*call_model* itself."""
        return call_model

    def wrap_tool_call(self, run_tool_call: ToolPort) -> ToolPort:
        """*run_tool_call* itself."""
        return run_tool_call

    async def finish(self, reason: LoopEndReason) -> None:
        """Nothing to record."""
