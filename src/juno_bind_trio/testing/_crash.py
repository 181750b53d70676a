"""A crash harness: stop a durable run at a named point, then prove the resume is safe.

Wrap the store a run writes to in a [CrashingStore][juno_bind_trio.testing.CrashingStore]
naming where the process should "die"; run the agent or loop against it under
[run_until_crash][juno_bind_trio.testing.run_until_crash]; then resume the run
on the real store and check what your tools did. From the crash on, the
wrapper writes nothing at all, exactly like a process killed by ``SIGKILL``:
no "interrupted" receipt, no release of the lease, no last transcript.

The points, each counted from the wrapper's creation:

* ``"after_model_answer"``: the *n*-th model answer that asked for tools was
  recorded, and none of its calls started;
* ``"after_calls_started"``: the *n*-th call's ``"started"`` receipt was
  written; the call itself never runs;
* ``"after_results"``: the *n*-th call settled (its result recorded);
* ``"before_save"``: the *n*-th end-of-iteration save is about to be written,
  and is not.

For a crash of a real process, kill it: the store needs nothing more, and the
[tests of this package][juno_bind_trio.store] do exactly that with
``SIGKILL``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal, Self, TypeAlias, TypeVar, final

import attrs

from juno_bind_trio._errors import SimulatedCrash
from juno_bind_trio._pending import PendingToolCall
from juno_bind_trio.run import ChainRef, EffectResumability, ToolCallReceiptKey
from juno_bind_trio.store import (
    CallDecision,
    ConversationRecord,
    Lease,
    PendingCallRecord,
    ReceiptRecord,
    RunRecord,
    RunStatus,
    RunStore,
    StoredRun,
)

__all__ = ["CRASH_POINTS", "CrashPoint", "CrashingStore", "run_until_crash"]

T = TypeVar("T")

CrashPoint: TypeAlias = Literal[
    "after_model_answer", "after_calls_started", "after_results", "before_save"
]
"""Where [CrashingStore][juno_bind_trio.testing.CrashingStore] stops the run."""

CRASH_POINTS: Final[frozenset[str]] = frozenset(CrashPoint.__args__)  # type: ignore[attr-defined]
"""Every [CrashPoint][juno_bind_trio.testing.CrashPoint]."""


def _point(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str) or value not in CRASH_POINTS:
        raise ValueError(
            f"CrashingStore: point must be one of {sorted(CRASH_POINTS)}, got {value!r}"
        )


def _count(_instance: object, _attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"CrashingStore: n must be a positive integer, got {value!r}")


@final
@attrs.define(eq=False, repr=False)
class CrashingStore:
    """A [RunStore][juno_bind_trio.store.RunStore] that "dies" at *point*, the *n*-th time.

    Every call passes through to *store* until then. At the point it raises
    [SimulatedCrash][juno_bind_trio.SimulatedCrash], and so does every call
    after it, writing nothing. ``crashed`` says whether it happened. The
    wrapper does not open or close *store*: open the real one around it.
    """

    _store: RunStore = attrs.field(alias="store")
    point: CrashPoint = attrs.field(validator=_point)
    n: int = attrs.field(default=1, validator=_count)
    crashed: bool = attrs.field(default=False, init=False)
    _seen: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        given: object = self._store
        if not isinstance(given, RunStore):
            raise TypeError(f"CrashingStore: store must be a RunStore, got {given!r}")

    def __repr__(self) -> str:
        state = "crashed" if self.crashed else f"{self._seen}/{self.n} seen"
        return f"<CrashingStore {self.point} n={self.n} {state}>"

    def _alive(self) -> None:
        if self.crashed:
            raise SimulatedCrash(f"the process crashed {self.point} #{self.n}")

    def _reached(self, point: CrashPoint) -> bool:
        if point != self.point:
            return False
        self._seen += 1
        return self._seen == self.n

    def _crash(self) -> SimulatedCrash:
        self.crashed = True
        return SimulatedCrash(f"the process crashed {self.point} #{self.n}")

    async def _after(self, point: CrashPoint, work: Callable[[], Awaitable[T]]) -> T:
        self._alive()
        result = await work()
        if self._reached(point):
            raise self._crash()
        # A write that was under way when another task crashed the process (one
        # group commit can carry both) returns into a dead process too: its
        # caller must not go on, or a tool would start after the crash.
        self._alive()
        return result

    async def _pass(self, work: Callable[[], Awaitable[T]]) -> T:
        self._alive()
        result = await work()
        self._alive()
        return result

    # The store is opened and closed by its owner, never through the wrapper.
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def now(self) -> float:
        return self._store.now()

    async def create_run(
        self,
        run_id: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        chain: ChainRef | None = None,
        agent: str | None = None,
        conversation_id: str | None = None,
    ) -> RunRecord:
        return await self._pass(
            lambda: self._store.create_run(
                run_id,
                messages=messages,
                chain=chain,
                agent=agent,
                conversation_id=conversation_id,
            )
        )

    async def get_run(self, run_id: str) -> RunRecord:
        return await self._pass(lambda: self._store.get_run(run_id))

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        parent_run_id: str | None = None,
        limit: int = 100,
    ) -> list[RunRecord]:
        return await self._pass(
            lambda: self._store.list_runs(status=status, parent_run_id=parent_run_id, limit=limit)
        )

    async def load(self, run_id: str) -> StoredRun:
        return await self._pass(lambda: self._store.load(run_id))

    async def receipts(self, run_id: str) -> list[ReceiptRecord]:
        return await self._pass(lambda: self._store.receipts(run_id))

    async def load_with_receipts(self, run_id: str) -> tuple[StoredRun, list[ReceiptRecord]]:
        return await self._pass(lambda: self._store.load_with_receipts(run_id))

    async def claim_run(
        self, run_id: str, *, owner: str, ttl: float, take_over: str | None = None
    ) -> Lease:
        return await self._pass(
            lambda: self._store.claim_run(run_id, owner=owner, ttl=ttl, take_over=take_over)
        )

    async def claim_next(self, *, owner: str, ttl: float) -> Lease | None:
        return await self._pass(lambda: self._store.claim_next(owner=owner, ttl=ttl))

    async def renew_lease(self, lease: Lease, *, ttl: float, progress: object = None) -> Lease:
        return await self._pass(lambda: self._store.renew_lease(lease, ttl=ttl, progress=progress))

    async def release(self, lease: Lease, *, status: RunStatus, detail: str | None = None) -> None:
        await self._pass(lambda: self._store.release(lease, status=status, detail=detail))

    async def save_turn(
        self, lease: Lease, *, iteration: int, assistant: Mapping[str, Any]
    ) -> None:
        await self._after(
            "after_model_answer",
            lambda: self._store.save_turn(lease, iteration=iteration, assistant=assistant),
        )

    async def start_call(
        self,
        lease: Lease,
        *,
        iteration: int,
        key: ToolCallReceiptKey,
        resumability: EffectResumability,
    ) -> ReceiptRecord:
        return await self._after(
            "after_calls_started",
            lambda: self._store.start_call(
                lease, iteration=iteration, key=key, resumability=resumability
            ),
        )

    async def settle_call(
        self,
        lease: Lease,
        *,
        iteration: int,
        tool_call_id: str,
        state: str,
        message: Mapping[str, Any] | None = None,
    ) -> None:
        await self._after(
            "after_results",
            lambda: self._store.settle_call(
                lease, iteration=iteration, tool_call_id=tool_call_id, state=state, message=message
            ),
        )

    async def save_transcript(
        self, lease: Lease, messages: Sequence[Mapping[str, Any]], *, iteration: int
    ) -> None:
        self._alive()
        if self._reached("before_save"):
            raise self._crash()
        await self._store.save_transcript(lease, messages, iteration=iteration)

    async def suspend_run(
        self, lease: Lease, *, iteration: int, calls: Sequence[PendingToolCall]
    ) -> None:
        await self._pass(lambda: self._store.suspend_run(lease, iteration=iteration, calls=calls))

    async def pending_calls(self, run_id: str) -> list[PendingToolCall]:
        return await self._pass(lambda: self._store.pending_calls(run_id))

    async def list_waiting(self, *, limit: int = 100) -> list[RunRecord]:
        return await self._pass(lambda: self._store.list_waiting(limit=limit))

    async def decide_calls(
        self, run_id: str, decisions: Mapping[str, CallDecision], *, owner: str | None = None
    ) -> list[PendingCallRecord]:
        return await self._pass(lambda: self._store.decide_calls(run_id, decisions, owner=owner))

    async def call_decisions(self, run_id: str) -> list[PendingCallRecord]:
        return await self._pass(lambda: self._store.call_decisions(run_id))

    async def claim_conversation(
        self, conversation_id: str, *, run_id: str, ttl: float
    ) -> list[dict[str, Any]]:
        return await self._pass(
            lambda: self._store.claim_conversation(conversation_id, run_id=run_id, ttl=ttl)
        )

    async def append_conversation(
        self, lease: Lease, *, conversation_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> None:
        await self._pass(
            lambda: self._store.append_conversation(
                lease, conversation_id=conversation_id, messages=messages
            )
        )

    async def release_conversation(self, conversation_id: str, *, run_id: str) -> None:
        await self._pass(lambda: self._store.release_conversation(conversation_id, run_id=run_id))

    async def list_conversations(self, *, limit: int = 100) -> list[ConversationRecord]:
        return await self._pass(lambda: self._store.list_conversations(limit=limit))

    async def conversation_messages(self, conversation_id: str) -> list[dict[str, Any]]:
        return await self._pass(lambda: self._store.conversation_messages(conversation_id))

    async def delete_conversation(self, conversation_id: str) -> bool:
        return await self._pass(lambda: self._store.delete_conversation(conversation_id))


def _only_crashes(exc: BaseException) -> bool:
    if isinstance(exc, SimulatedCrash):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_crashes(e) or _is_cancel(e) for e in exc.exceptions) and any(
            _only_crashes(e) for e in exc.exceptions
        )
    return False


def _is_cancel(exc: BaseException) -> bool:
    import anyio

    return isinstance(exc, anyio.get_cancelled_exc_class())


def _awaitable(value: object) -> Awaitable[object]:
    if not inspect.isawaitable(value):
        raise TypeError(f"run_until_crash: work() must return an awaitable, got {value!r:.80}")
    return value


async def run_until_crash(work: Callable[[], Awaitable[object]]) -> bool:
    """Await ``work()``; return ``True`` if it ended in a simulated crash, ``False`` if it
    finished first. Any other exception propagates."""
    if not callable(work):
        raise TypeError(f"run_until_crash: work must be an async callable, got {work!r}")
    try:
        await _awaitable(work())
    except BaseException as exc:
        if _only_crashes(exc):
            return True
        raise
    return False
