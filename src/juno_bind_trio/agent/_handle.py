"""The handle a reader holds on a run in progress: ``open_run``'s ``AgentRun`` and its block."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, NoReturn, final

import anyio

from juno_bind_trio._cancel import split_cancellations
from juno_bind_trio._errors import UsageError
from juno_bind_trio.completion import ResetEvent, TextEvent, ToolCallDeltaEvent, TurnTextView

from ._events import AgentEvent, RunEndedEvent, TurnEndedEvent
from ._output_plan import ToolAnswerView
from ._result import AgentResult, OutputT
from ._store_session import continue_in_conversation

if TYPE_CHECKING:
    from ._pipe import EventPipe
    from ._run import _RunCore

__all__ = ["AgentRun", "OpenRun", "open_agent_run"]


@final
class AgentRun(Generic[OutputT]):
    """A run in progress, from [open_run][juno_bind_trio.agent.Agent.open_run]: iterate it.

    ```python
    async with agent.open_run("Plan my week") as run:
        async for event in run:
            ...  # TextEvent / ResetEvent / ToolCall*Event / TurnEndedEvent / RunEndedEvent
    print(run.result.output)
    ```

    * *run_id*; *turn_id*: the turn whose events were read last.
    * *text*: what a reader should show for that turn now, retractions
      applied (a reset clears it); once the turn ended, its final text.
    * [partial_output][juno_bind_trio.agent.AgentRun.partial_output]: the
      output type read from *text* so far, for a structured answer shown as
      it arrives.
    * *result*: the [AgentResult][juno_bind_trio.agent.AgentResult], once
      the run ended (``None`` before, and after a cancel or failure).
    * *messages*: the transcript so far (a snapshot).
    * [stop][juno_bind_trio.agent.AgentRun.stop]: soft, calls in flight
      finish; [cancel][juno_bind_trio.agent.AgentRun.cancel]: hard.

    Leaving the ``async with`` block before the run ended cancels it, with the
    loop's guarantees: every tool call of the last assistant message is
    answered (``not_run`` / ``interrupted``), nothing queued starts.
    """

    __slots__ = (
        "_cancel_requested",
        "_core",
        "_error",
        "_partial_text",
        "_partial_value",
        "_partial_view",
        "_pipe",
        "_raised",
        "_scope",
        "_tool_answer",
        "_turn_id",
        "_view",
        "result",
    )

    def __init__(self, core: _RunCore[OutputT], pipe: EventPipe) -> None:
        self._core = core
        self._pipe = pipe
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested: bool = False
        self._error: Exception | None = None
        self._raised: BaseException | None = None  # the run's own BaseException, if any
        self._view: TurnTextView | None = None
        self._turn_id: str | None = None
        self.result: AgentResult[OutputT] | None = None
        # What partial_output last read: the view, its epoch and whether it
        # was final, the text, and the value (None: nothing validated).
        self._partial_view: tuple[TurnTextView, int, bool] | None = None
        self._partial_text: str = ""
        self._partial_value: OutputT | None = None
        # Tool mode's answer streams as a final-answer call's arguments (made at its first).
        self._tool_answer: ToolAnswerView | None = None

    def __repr__(self) -> str:
        return f"<AgentRun run_id={self._core.run_id!r} ended={self.result is not None}>"

    @property
    def run_id(self) -> str:
        """This run's id."""
        return self._core.run_id

    @property
    def agent_name(self) -> str | None:
        """The name of the agent in charge now: the starting agent's, then a handoff's
        target's from the [HandoffEvent][juno_bind_trio.agent.HandoffEvent] on."""
        return self._core.agent.name

    @property
    def turn_id(self) -> str | None:
        """The turn the last event read belongs to, ``None`` before any."""
        return self._turn_id

    @property
    def text(self) -> str:
        """The text a reader should show now for the current turn (retractions applied)."""
        return "" if self._view is None else self._view.text

    @property
    def partial_output(self) -> OutputT | None:
        """The output type read from [text][juno_bind_trio.agent.AgentRun.text] so far.

        For a structured answer shown while it streams. For an agent with an
        ``output_type`` other than ``str``, the text received so far is
        validated with pydantic's partial JSON mode: an unfinished string
        counts as far as it goes, and a model validates once every required
        field has begun (fields with a default show the default until they
        arrive). ``None`` until something validates.

        It follows [text][juno_bind_trio.agent.AgentRun.text]: a reset (a
        fallback to another endpoint, a structured-output re-ask) or a new turn
        starts it again from ``None``. Within one attempt, a longer text that
        does not validate (a list item whose required fields have not all
        begun, an answer that turns out wrong) keeps the last value that did,
        so a screen never flickers back to nothing. Once the turn ended, its
        whole text is read as the run reads its answer, so after the last
        event of a completed run this equals ``run.result.output``.

        With ``output_type=str`` it is [text][juno_bind_trio.agent.AgentRun.text]
        itself (``None`` before the first event of a turn). Reading it never
        raises; it parses again only when the text changed, so polling it per
        event costs one parse per change.
        """
        view = self._view
        answer = self._tool_answer
        # The final-answer call streaming now: in a turn whose text view is not final
        # (or has none yet: the view still held is an earlier turn's, ended).
        if answer is not None and (
            view is None or view.turn_id != answer.turn_id or not view.final
        ):
            streaming = answer.current()
            if streaming is not None:
                with contextlib.suppress(Exception):
                    self._partial_value = self._core.agent.output.partial_tool(*streaming)
                return self._partial_value
        if view is None:
            return None
        text = view.text
        key = (view, view.epoch, view.final)
        last = self._partial_view
        if last == key and text == self._partial_text:
            return self._partial_value
        # The same attempt grew: a prefix that does not validate keeps the last value.
        same_attempt = (
            last is not None
            and last[0] is view
            and last[1] == key[1]
            and text.startswith(self._partial_text)
        )
        value: OutputT | None = self._partial_value if same_attempt else None
        # Any prefix, and whatever a user's validator raises on one: never raise here.
        with contextlib.suppress(Exception):
            value = self._core.agent.output.partial(text, complete=view.final)
        self._partial_view = key
        self._partial_text = text
        self._partial_value = value
        return value

    @property
    def messages(self) -> Sequence[dict[str, Any]]:
        """The transcript so far, as a read-only snapshot."""
        return tuple(self._core.state.messages)

    def stop(self) -> None:
        """Soft stop: nothing new is claimed, calls in flight finish, the run ends ``"stopped"``."""
        self._core.own_stop.cancel()

    def cancel(self) -> None:
        """Hard cancel: what is running stops at its next checkpoint; it ends ``"cancelled"``."""
        self._cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self

    async def __anext__(self) -> AgentEvent:
        event = await self._pipe.get()
        kind = type(event)
        if kind is TextEvent or kind is ResetEvent:
            turn_id = event.turn_id  # type: ignore[union-attr]
            view = self._view
            if view is None or view.turn_id != turn_id:
                view = self._view = TurnTextView(turn_id)
            self._turn_id = turn_id
            view.apply(event)  # type: ignore[arg-type]
            if kind is ResetEvent and self._tool_answer is not None:
                self._tool_answer.reset(turn_id)
                self._partial_value = None
        elif kind is ToolCallDeltaEvent:
            answer = self._tool_answer
            output = self._core.agent.output  # the agent in charge's (a handoff's target's)
            if answer is None and output.mode == "tool":
                answer = self._tool_answer = ToolAnswerView(output.tool_names)
            if answer is not None:
                delta: ToolCallDeltaEvent = event  # type: ignore[assignment]
                answer.apply(delta.turn_id, delta.index, delta.name, delta.delta)
        elif kind is TurnEndedEvent:
            turn_id = event.turn_id  # type: ignore[union-attr]
            view = self._view
            if view is None or view.turn_id != turn_id:
                view = self._view = TurnTextView(turn_id)
            self._turn_id = turn_id
            view.finalize(event.content or "")  # type: ignore[union-attr]
        return event

    async def _drive(self) -> None:
        reason = "cancelled"
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_requested:
                    scope.cancel()
                try:
                    result = await self._core.run()
                except Exception as exc:
                    self._error = exc
                    reason = "failed"
                else:
                    self.result = result
                    reason = result.reason
        except BaseException as exc:
            # A BaseException that is not the cancellation (a tool's KeyboardInterrupt,
            # a host's own subclass): it ends the block at once, as itself.
            if split_cancellations(exc)[1] is not None:
                reason = "failed"
                self._raised = exc
            raise
        finally:
            # Synchronous: runs on the way out of a cancel too.
            self._pipe.put(RunEndedEvent(self._core.run_id, reason))
            self._pipe.close()

    def _leave(self) -> None:
        if self.result is None and self._error is None:
            self.cancel()


def _leaving(
    group: BaseExceptionGroup[Any], units: tuple[BaseException | None, ...]
) -> BaseException:
    """What leaves ``open_run`` when its task group raised *group*.

    The task group is how the run goes on while the reader reads, an
    implementation detail: one failure (the reader's own exception, or the
    run's BaseException) leaves as itself, and a cancellation leaves as a
    cancellation, which the scope that was cancelled then absorbs. A failure
    outranks a cancellation that arrived with it, as it would have had the
    reader's code run in no task group at all. *units* are the exceptions the
    reader and the run raised: kept whole even when they are groups
    themselves. Only two failures at once (the reader's and the run's) stay
    together in the group.
    """
    cancelled = anyio.get_cancelled_exc_class()
    failures: list[BaseException] = []
    cancels: list[BaseException] = []
    # A task group may hand back a copy of a group it was given (trio splits the
    # cancellations out, and a split derives every group on the way): a copy
    # holds the very same leaves, so that is how a unit is found again.
    wholes = [(unit, _leaf_ids(unit)) for unit in units if isinstance(unit, BaseExceptionGroup)]

    def walk(exc: BaseException) -> None:
        if isinstance(exc, cancelled):
            cancels.append(exc)
        elif any(exc is unit for unit in units):
            failures.append(exc)
        elif isinstance(exc, BaseExceptionGroup):
            for unit, leaves in wholes:
                if exc.message == unit.message and _leaf_ids(exc) == leaves:
                    failures.append(unit)
                    return
            for inner in exc.exceptions:
                walk(inner)
        else:
            failures.append(exc)

    walk(group)
    if len(failures) == 1:
        return failures[0]
    if not failures and cancels:
        return cancels[0]
    return group


def _leaf_ids(group: BaseExceptionGroup[Any]) -> list[int]:
    leaves: list[int] = []
    for inner in group.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            leaves.extend(_leaf_ids(inner))
        else:
            leaves.append(id(inner))
    return leaves


_USE_ASYNC_WITH: Final = (
    "Agent.open_run(...) starts a run only inside `async with`: write "
    "`async with agent.open_run(...) as run:` and read the events inside the block "
    "(`async for event in run:`); for the result alone, use `await agent.run(...)`"
)

# What a reader reaches for on the object open_run returns, thinking it the run.
_RUN_ATTRIBUTES: Final = frozenset(
    {"result", "messages", "text", "turn_id", "run_id", "partial_output", "stop", "cancel"}
)


@final
class OpenRun(AbstractAsyncContextManager["AgentRun[OutputT]"], Generic[OutputT]):
    """What [open_run][juno_bind_trio.agent.Agent.open_run] returns: enter it with ``async with``.

    The run starts when the block is entered and is over when it is left.
    Iterating this object, awaiting it or entering it with a plain ``with``
    raises ``TypeError`` saying so; it can be entered once.
    """

    __slots__ = ("_core", "_entered", "_manager", "_pipe")

    def __init__(self, core: _RunCore[OutputT], pipe: EventPipe) -> None:
        self._core = core
        self._pipe = pipe
        self._entered = False
        self._manager: AbstractAsyncContextManager[AgentRun[OutputT]] | None = None

    def __repr__(self) -> str:
        return f"<OpenRun run_id={self._core.run_id!r} entered={self._entered}>"

    async def __aenter__(self) -> AgentRun[OutputT]:
        if self._entered:
            raise UsageError(
                "Agent.open_run: this run was entered already; call open_run again for another run"
            )
        self._entered = True
        # Decisions on a conversation continue its waiting run: its id, from the start.
        try:
            await continue_in_conversation(self._core, "Agent.open_run")
        except BaseException:
            self._pipe.close()  # no run started: nothing will write to it, or read it
            self._pipe.close_reader()
            raise
        manager = self._manager = open_agent_run(self._core, self._pipe)
        return await manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        manager = self._manager
        assert manager is not None
        return await manager.__aexit__(*exc_info)

    def __aiter__(self) -> NoReturn:
        raise TypeError(_USE_ASYNC_WITH)

    def __await__(self) -> NoReturn:
        raise TypeError(_USE_ASYNC_WITH)

    def __iter__(self) -> NoReturn:
        raise TypeError(_USE_ASYNC_WITH)

    def __enter__(self) -> NoReturn:
        raise TypeError(_USE_ASYNC_WITH)

    def __exit__(self, *exc_info: object) -> None:
        raise TypeError(_USE_ASYNC_WITH)

    def __getattr__(self, name: str) -> Any:
        if name in _RUN_ATTRIBUTES:
            raise TypeError(f"{_USE_ASYNC_WITH}; then read run.{name}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@asynccontextmanager
async def open_agent_run(
    core: _RunCore[OutputT], pipe: EventPipe
) -> AsyncIterator[AgentRun[OutputT]]:
    """Run *core* in a task of its own while the caller reads its events.

    The caller's block runs inside the task group that runs the run; what
    leaves it is untangled from the group (see ``_leaving``).
    """
    run: AgentRun[OutputT] = AgentRun(core, pipe)
    reader_raised: BaseException | None = None
    leaving: BaseException | None = None
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run._drive)
            try:
                yield run
            except BaseException as exc:
                reader_raised = exc
                raise
            finally:
                run._leave()
    except BaseExceptionGroup as group:
        leaving = _leaving(group, (reader_raised, run._raised))
        if leaving is group:
            raise
    finally:
        pipe.close_reader()
    if leaving is not None:
        # Raised here, past the except: as it was raised, with no context added.
        raise leaving
    if run._error is not None:
        raise run._error
