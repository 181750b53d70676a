"""A batch of tool calls, run by per-tool worker tasks that stop claiming when told to.

One assistant message can ask for many tool calls at once, often many to the
same tool. They run concurrently, but per tool, not all at once: calls are
grouped by tool name and each group gets at most ``per_tool_limit`` worker
tasks (five by default), which claim the group's calls one at a time, in
order. A tool therefore never sees more than ``per_tool_limit`` calls at a
time from one batch, different tools never wait for each other, and a group
always has as many calls in flight as it can while work is queued.

Stopping, two ways
------------------

The soft stop (``stop``, the TypeScript ``signal``) bounds the batch, and
bounding it is the point. A batch of forty calls to one tool runs five at a
time, so thirty-five sit queued, and without a stop the pool claims every one
of them however long ago the run's deadline fired or the user pressed stop.
Each queued call is a side effect nobody wants any more: a write, an email, a
third-party POST. So each worker reads ``stop.cancel_called`` every time it is
about to claim a call, rather than once before the batch: a batch that was
fine when it started is usually stopped *while* its first calls are in
flight, not before. Calls already in flight are left to finish. Calls that
never ran still come back, as ``Error(AbortedToolCallError(id))``, because
every ``tool_call_id`` of the assistant message needs an answer either way,
and a caller that got a shorter list than it passed would mispair the rest.

The hard cancel is Trio's: the scope around [`ToolBatch.run()`][juno_bind_trio.run.ToolBatch.run] is
cancelled. Then nothing queued starts, calls in flight are cancelled at their
next checkpoint, and the cancellation propagates out of ``run()`` untouched.
Returning a list is then impossible, but the loop above still has to answer
every ``tool_call_id`` before the cancellation leaves it, and the answer
depends on a fact only the pool knows: was the call never claimed (nothing
happened) or claimed and cut off (its effect is unknown)? So the batch is an
object the caller holds. Before the cancellation leaves ``run()``, with no
checkpoint in between, every call still queued becomes ``"refused"`` and
every call still running becomes ``"interrupted"``, each with its result, and
the caller reads them from the batch in its ``except`` or ``finally``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Final, Generic, Literal, NoReturn, TypeVar, cast, final

import anyio.lowlevel
import attrs
import outcome

from juno_bind_trio._calls import ToolCall, read_tool_call
from juno_bind_trio._cancel import (
    cancelled_now,
    checkpoint_if_cancelled_fn,
    is_foreign_cancellation,
    one_failure,
    open_task_group,
    split_cancellations,
)
from juno_bind_trio._errors import AbortedToolCallError, InterruptedToolCallError, UsageError

from ._calls import StopSignal, ToolCallLike

__all__ = [
    "DEFAULT_PER_TOOL_LIMIT",
    "CallState",
    "ToolBatch",
    "ToolBatchStatistics",
    "never_started",
    "run_tool_calls_pooled_by_tool",
]

T = TypeVar("T")

CallState = Literal["queued", "running", "finished", "refused", "interrupted"]
"""Where one call of a [`ToolBatch`][juno_bind_trio.run.ToolBatch] is.

``"queued"`` (not claimed yet) → ``"running"`` (claimed, its tool awaited) →
``"finished"`` (returned or raised: its result is ``Value`` or ``Error``).
Or ``"queued"`` → ``"refused"`` (never claimed: the soft stop fired, or a hard
cancel arrived first; nothing happened). Or ``"running"`` → ``"interrupted"``
(a hard cancel cut it off; its effect is unknown).
"""

DEFAULT_PER_TOOL_LIMIT: Final = 5
"""Workers per tool when the caller does not say: the TypeScript package's five."""

# Bound once: the hot path settles one outcome per call, through outcome's
# public constructors (never through its slot layout, which is outcome's own).
_Value: Final = outcome.Value
_Error: Final = outcome.Error


@attrs.frozen
class ToolBatchStatistics:
    """A snapshot of a [`ToolBatch`][juno_bind_trio.run.ToolBatch], from
    [`ToolBatch.statistics()`][juno_bind_trio.run.ToolBatch.statistics].

    ``claimed`` counts every call a worker has taken: ``in_flight`` (running
    now) + ``finished`` + ``interrupted``. Each call is in exactly one of
    ``queued``, ``in_flight``, ``finished``, ``refused`` and ``interrupted``,
    so those five add up to ``total``.
    """

    total: int
    queued: int
    claimed: int
    in_flight: int
    finished: int
    refused: int
    interrupted: int


def never_started(error: BaseException, call_id: str) -> bool:
    """Whether *error*, raised by a call's dispatcher, says that call never started.

    ``AbortedToolCallError`` for the call's own id: the dispatcher was entered
    but the call's work had not begun when a cancel came (a synchronous tool
    whose worker thread never took it). Under a cancel, such a call is
    answered ``not_run`` rather than ``interrupted``.
    """
    return type(error) is AbortedToolCallError and error.tool_call_id == call_id


def _raised_in(group: BaseException, leaf: BaseException) -> BaseException:
    """The innermost group of *group* that holds *leaf* itself (*group* if none does)."""
    stack = [group]
    while stack:
        node = stack.pop()
        if isinstance(node, BaseExceptionGroup):
            if any(child is leaf for child in node.exceptions):
                return node
            stack.extend(node.exceptions)
    return group


def _check_per_tool_limit(where: str, value: object) -> int:
    # bool is an int subclass, and `True` is never a worker count anyone meant;
    # a float (even 5.0) or None is refused rather than rounded or defaulted,
    # because a limit that silently became "something else" is a limit that
    # does not hold.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: per_tool_limit must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{where}: per_tool_limit must be a positive integer, got {value!r}")
    return value


def _check_stop(where: str, value: object) -> StopSignal | None:
    if value is not None and not isinstance(getattr(value, "cancel_called", None), bool):
        raise TypeError(
            f"{where}: stop must be None or have a bool `cancel_called` "
            f"(a trio or anyio CancelScope), got {value!r}"
        )
    return value  # type: ignore[return-value]


def _check_calls(calls: Iterable[ToolCallLike]) -> tuple[ToolCallLike, ...]:
    # A single call (a dict is itself iterable, over its keys) passed where a
    # list was meant would otherwise fail as a confusing "malformed call 'id'".
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Iterable):
        raise TypeError(f"ToolBatch: calls must be a sequence of tool calls, got {calls!r}")
    return tuple(calls)


def _raise_bad_ids(calls: tuple[ToolCallLike, ...], ids: list[str]) -> NoReturn:
    seen: set[str] = set()
    for call, call_id in zip(calls, ids, strict=True):
        if not call_id:
            raise ValueError(f"ToolBatch: tool call ids must be non-empty, got {call!r}")
        if call_id in seen:
            raise ValueError(f"ToolBatch: tool call ids must be unique, got {call_id!r} twice")
        seen.add(call_id)
    raise AssertionError("unreachable: the ids were checked as bad")  # pragma: no cover


@final
@attrs.define(eq=False, repr=False)
class ToolBatch(Generic[T]):
    """One assistant message's tool calls, run once, and readable however the run ended.

    ``ToolBatch(calls)`` checks every call up front (each is a function tool
    call, in either shape [`ToolCallLike`][juno_bind_trio.run.ToolCallLike] allows;
    ids are non-empty and unique) and groups them by tool name. Every call
    starts ``"queued"``.

    Hold on to the batch across [`run()`][juno_bind_trio.run.ToolBatch.run]: when a hard cancel ends
    the run, [`states`][juno_bind_trio.run.ToolBatch.states] and
    [`result()`][juno_bind_trio.run.ToolBatch.result] still say, for every call, whether it
    finished, was refused (never started) or was interrupted (started and cut off), which is what
    the caller needs to answer each ``tool_call_id``.

    The outcomes in [`run()`][juno_bind_trio.run.ToolBatch.run]'s list and those
    [`result()`][juno_bind_trio.run.ToolBatch.result] returns are the same objects, and an
    ``outcome`` can be unwrapped once: read ``.value`` / ``.error`` where more than one reader needs
    them.
    """

    _calls: tuple[ToolCallLike, ...] = attrs.field(converter=_check_calls, alias="calls")
    _ids: tuple[str, ...] = attrs.field(init=False)
    _groups: dict[str, list[int]] = attrs.field(init=False)
    _states: list[CallState] = attrs.field(init=False)
    _results: list[outcome.Outcome[T] | None] = attrs.field(init=False)
    _ran: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        ids: list[str] = []
        add_id = ids.append
        groups: dict[str, list[int]] = {}
        for index, call in enumerate(self._calls):
            # The reads inlined: this loop runs once per call of every batch, and
            # a function call is a third of its cost. A ToolCall is checked already.
            if type(call) is ToolCall:
                add_id(call.id)
                group = groups.get(call.name)
                if group is None:
                    groups[call.name] = [index]
                else:
                    group.append(index)
                continue
            if type(call) is dict and call.get("type", "function") == "function":
                function = call.get("function")
                if type(function) is dict:
                    call_id = call.get("id")
                    name = function.get("name")
                    if (
                        type(call_id) is str
                        and type(name) is str
                        and type(function.get("arguments")) is str
                    ):
                        add_id(call_id)
                        group = groups.get(name)
                        if group is None:
                            groups[name] = [index]
                        else:
                            group.append(index)
                        continue
            call_id, name, _ = read_tool_call("ToolBatch", call)
            add_id(call_id)
            group = groups.get(name)
            if group is None:
                groups[name] = [index]
            else:
                group.append(index)
        # The id is how every answer finds its call: an empty one cannot be
        # answered, and a repeated one would be answered twice for one call
        # and never for the other.
        if len(set(ids)) != len(ids) or "" in ids:
            _raise_bad_ids(self._calls, ids)
        self._ids = tuple(ids)
        self._groups = groups
        self._states = ["queued"] * len(ids)
        self._results = [None] * len(ids)

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<ToolBatch total={stats.total} queued={stats.queued} in_flight={stats.in_flight} "
            f"finished={stats.finished} refused={stats.refused} interrupted={stats.interrupted}>"
        )

    @property
    def calls(self) -> tuple[ToolCallLike, ...]:
        """The calls, in the order given; every other sequence here is aligned with it."""
        return self._calls

    @property
    def states(self) -> tuple[CallState, ...]:
        """The [`CallState`][juno_bind_trio.run.CallState] of every call, aligned with
        [`calls`][juno_bind_trio.run.ToolBatch.calls] (a snapshot)."""
        return tuple(self._states)

    def state(self, index: int) -> CallState:
        """The [`CallState`][juno_bind_trio.run.CallState] of the call at *index*."""
        return self._states[index]

    def result(self, index: int) -> outcome.Outcome[T] | None:
        """The settled result of the call at *index*, or ``None`` while it is queued or running."""
        return self._results[index]

    def statistics(self) -> ToolBatchStatistics:
        """Count the calls in each state, now."""
        counts = Counter(self._states)
        in_flight = counts["running"]
        finished = counts["finished"]
        interrupted = counts["interrupted"]
        return ToolBatchStatistics(
            total=len(self._states),
            queued=counts["queued"],
            claimed=in_flight + finished + interrupted,
            in_flight=in_flight,
            finished=finished,
            refused=counts["refused"],
            interrupted=interrupted,
        )

    async def run(
        self,
        run: Callable[[ToolCallLike], Awaitable[T]],
        *,
        stop: StopSignal | None = None,
        per_tool_limit: int = DEFAULT_PER_TOOL_LIMIT,
    ) -> list[outcome.Outcome[T]]:
        """Run every call through ``await run(call)``; return results aligned with
        [`calls`][juno_bind_trio.run.ToolBatch.calls].

        Each result is ``outcome.Value(v)`` for a call that returned ``v``,
        ``outcome.Error(exc)`` for one that raised an ``Exception`` (a failing
        tool is a result, never an exception out of the pool), and
        ``outcome.Error(AbortedToolCallError(id))`` for one refused because
        ``stop.cancel_called`` was true when a worker came to claim it.

        :param run: the async function that executes one call (a host's tool
            dispatcher). Called at most ``per_tool_limit`` times concurrently
            per tool name.
        :param stop: the soft stop, only *read*, at claim time: once it is
            cancelled, no worker claims another call and calls in flight
            finish. A ``trio.CancelScope`` or ``anyio.CancelScope``.
        :param per_tool_limit: workers per tool name, a positive ``int``.
        :raises UsageError: the batch was already run (a batch runs once).
        :raises TypeError: a bad ``run``, ``stop`` or ``per_tool_limit`` type.
        :raises ValueError: ``per_tool_limit`` below 1.

        If the scope around this call is cancelled, no queued call starts,
        calls in flight are cancelled, and the cancellation propagates
        unchanged; before it leaves, every queued call is settled
        ``"refused"`` (``Error(AbortedToolCallError(id))``) and every running
        one ``"interrupted"`` (``Error(InterruptedToolCallError(id))``), for
        the caller to read from the batch. A call whose *run* raises
        ``AbortedToolCallError`` for that call's own id as the cancel lands
        says its work never began (a worker thread that never took it): it is
        settled ``"refused"`` too.
        """
        limit = _check_per_tool_limit("ToolBatch.run", per_tool_limit)
        if not callable(run):
            raise TypeError(f"ToolBatch.run: run must be an async callable, got {run!r}")
        stop = _check_stop("ToolBatch.run", stop)
        if self._ran:
            raise UsageError(
                "ToolBatch.run: this batch has already been run; build a new ToolBatch "
                "for the next batch of calls"
            )
        self._ran = True
        if not self._states:
            # Still a checkpoint, as every async function in a Trio API is.
            await anyio.lowlevel.checkpoint()
            return []
        checkpoint_if_cancelled = checkpoint_if_cancelled_fn()
        bare: BaseException | None = None
        try:
            # Trio's own nursery on Trio (half the cost of anyio's task group
            # over it), anyio's task group elsewhere; both leave the same way.
            async with open_task_group() as workers:
                for indices in self._groups.values():
                    # One iterator per group, shared by the group's workers: each
                    # next() is a claim, and the event loop runs one task at a
                    # time, so no call is claimed twice and claims go in order.
                    claims = iter(indices)
                    for _ in range(min(limit, len(indices))):
                        workers.start_soon(self._work, claims, run, stop, checkpoint_if_cancelled)
        except BaseException as exc:
            # Synchronously, before anything else can run: this is what lets a
            # caller answer every call in its `except` / `finally`.
            self._settle_unfinished()
            # What leaves is the cancellation alone, or the failure alone. Only a
            # BaseException that is not an Exception (a KeyboardInterrupt, a
            # SystemExit, a host's own subclass) gets here from a tool, and the
            # task group wraps it, together with the Cancelled of every worker it
            # cut off. Taking the cancellations out first is what makes one
            # failure one exception on both backends (on Trio the cancel of a
            # sibling lands in the same group; asyncio often raises it bare), and
            # what lets a caller's cancel scope absorb a cancel that is all
            # cancellation. A genuine group of several failures stays a group.
            _, failures = split_cancellations(exc)
            if failures is None:
                raise
            failure = one_failure(failures)
            if failure is exc:
                raise
            holder = _raised_in(exc, failure)
            if holder is not exc:
                # Raised in a group of the tool's own (its task group, cut off
                # mid-failure): that group is its cause, readable beside it.
                raise failure from holder
            bare = failure
        # Raised bare by a worker, so the workers' group is the only wrapping:
        # raised here, past the except, as it was raised, with nothing added.
        if bare is not None:
            raise bare
        # A worker that ended without settling its call would leave a None in the
        # list below, and a caller would pair it with nothing. Every way a tool
        # can end is settled in _work; this sweep keeps the promise regardless.
        states = self._states
        if "running" in states or "queued" in states:
            self._settle_unfinished()
        # Every slot is settled now; a copy, so the caller cannot rewrite the batch.
        return cast("list[outcome.Outcome[T]]", list(self._results))

    async def _work(
        self,
        claims: Iterator[int],
        run: Callable[[ToolCallLike], Awaitable[T]],
        stop: StopSignal | None,
        checkpoint_if_cancelled: Callable[[], Awaitable[None]],
    ) -> None:
        calls = self._calls
        states = self._states
        results = self._results
        make_value = _Value
        for index in claims:
            # The hard-cancel check: a cancel can land without this task having
            # seen it (delivered at the previous tool's last checkpoint and
            # swallowed, or requested after it), and a claim must never start a
            # call after one. Raising here leaves the claimed call "queued", so
            # the sweep in run() refuses it.
            await checkpoint_if_cancelled()
            if stop is not None and stop.cancel_called:
                states[index] = "refused"
                results[index] = _Error(AbortedToolCallError(self._ids[index]))
                continue
            states[index] = "running"
            try:
                value = await run(calls[index])
            except Exception as exc:
                if cancelled_now():
                    if never_started(exc, self._ids[index]):
                        # The dispatcher says the call's work never began (a
                        # worker thread the cancel came before): refused, as
                        # if never claimed.
                        states[index] = "refused"
                        results[index] = _Error(exc)
                        await checkpoint_if_cancelled()
                        continue  # pragma: no cover - the checkpoint above raises
                    # The tool turned the cancellation into an ordinary error
                    # (a common habit of wrappers). It was cut off, whatever
                    # it says: record it as interrupted, keeping what it
                    # raised as the cause, and let the cancellation through.
                    self._interrupt(index, exc)
                    await checkpoint_if_cancelled()
                    continue  # pragma: no cover - the checkpoint above raises
                results[index] = _Error(exc)
            except BaseException as exc:
                if cancelled_now():
                    _, failures = split_cancellations(exc)
                    if isinstance(failures, Exception):
                        # A tool that fans out in its own task group: one part
                        # failed while the cancel cut off another, and the group
                        # holds both. The same fact as above (cut off, whatever
                        # else went wrong), so the same answer; the cancellation
                        # leaves as itself, not in a group, so the caller's
                        # scope absorbs it.
                        self._interrupt(index, failures)
                        await checkpoint_if_cancelled()
                        continue  # pragma: no cover - the checkpoint above raises
                    # The cancellation itself (the task group turns even a stray
                    # CancelledError into its own), or a BaseException that
                    # outranks it. Left "running": run()'s sweep answers this call
                    # "interrupted".
                    raise
                if not is_foreign_cancellation(exc):
                    raise
                # asyncio's CancelledError from a future somebody else cancelled,
                # while nobody cancelled the run: the tool failed, like any
                # other failure. Left to propagate, it would end this worker
                # silently (the task group reads it as the worker's own cancel)
                # and take its siblings' calls with it.
                results[index] = _Error(exc)
            else:
                results[index] = make_value(value)
            states[index] = "finished"

    def _interrupt(self, index: int, cause: BaseException) -> None:
        interrupted = InterruptedToolCallError(self._ids[index])
        interrupted.__cause__ = cause
        self._states[index] = "interrupted"
        self._results[index] = _Error(interrupted)

    def _settle_unfinished(self) -> None:
        """Settle every call still queued (refused) or running (interrupted). No checkpoint."""
        states = self._states
        results = self._results
        for index, state in enumerate(states):
            if state == "queued":
                states[index] = "refused"
                results[index] = _Error(AbortedToolCallError(self._ids[index]))
            elif state == "running":
                states[index] = "interrupted"
                results[index] = _Error(InterruptedToolCallError(self._ids[index]))


async def run_tool_calls_pooled_by_tool(
    calls: Iterable[ToolCallLike],
    run: Callable[[ToolCallLike], Awaitable[T]],
    *,
    stop: StopSignal | None = None,
    per_tool_limit: int = DEFAULT_PER_TOOL_LIMIT,
) -> list[outcome.Outcome[T]]:
    """Run *calls* through *run*, pooled by tool name; return results aligned with *calls*.

    The one-shot form of ``await ToolBatch(calls).run(run, stop=stop,
    per_tool_limit=per_tool_limit)``, for a caller that does not need to read
    the batch after a hard cancel. An empty batch returns ``[]``. See
    [`ToolBatch.run()`][juno_bind_trio.run.ToolBatch.run] for the results and both ways to stop.
    """
    batch: ToolBatch[T] = ToolBatch(calls)
    return await batch.run(run, stop=stop, per_tool_limit=per_tool_limit)
