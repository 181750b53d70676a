"""One agent run: the ToolLoop it builds, the dispatcher it gives it, the stream it feeds.

Every run is exactly one [ToolLoop][juno_bind_trio.loop.ToolLoop]; this module
adds nothing to the kernel's control flow. What it adds is plumbing, each
piece in one place; where the run's state lives (in memory, in a store) is
its [RunSession][juno_bind_trio.agent.RunSession], and plain and durable runs
take the one path ``_RunCore._run_on``:

* ``_RunCore.build_loop`` builds the loop on the session: every
  port the run uses is named there, ``save_session`` included.
* ``_RunCore.dispatch`` is the only way a tool runs:
  name lookup, the [RunContext][juno_bind_trio.agent.RunContext], the tool, the conversion of
  its return value into the tool message, and the started/ended events.
  Receipts are recorded around it.
* ``_RunCore.call_model`` is the only way the model
  is called: the structured-output re-ask lives there, around the model, inside the turn.

Events for a reader ([open_run][juno_bind_trio.agent.Agent.open_run]) go
through one small seam, ``_EventPipe``: the text stream's
sink, the dispatcher and the loop's rejection events all write to it synchronously,
in the order things happen, and the reader takes them out in that order.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, NoReturn, final

import anyio
import attrs
import pydantic_core

from juno_bind_trio import _tracing
from juno_bind_trio._cancel import cancelled_now, checkpoint_if_cancelled, split_cancellations
from juno_bind_trio._errors import (
    StructuredOutputError,
    ToolFailureError,
    UsageError,
    UsageLimitExceeded,
)
from juno_bind_trio.completion import (
    CoalescingSink,
    ResetEvent,
    TextEvent,
    ToolCallDeltaEvent,
    TurnStreamEvent,
    TurnStreamSink,
    TurnTextView,
    retry_structured_output,
)
from juno_bind_trio.loop import (
    LoopResult,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    RunStats,
    ToolCallOutcome,
    ToolCallRejectedEvent,
    ToolLoop,
)
from juno_bind_trio.plugins import kind_for_error, tool_error_text, tool_failure_content
from juno_bind_trio.run import (
    ChainRef,
    ChainRule,
    EffectResumability,
    SoftStop,
    ToolCall,
    admit_child_run,
    either_stop,
    root_chain,
    tool_call_name,
    tool_message,
)
from juno_bind_trio.store import DEFAULT_LEASE_TTL, default_owner

from ._context import RunContext
from ._events import (
    AgentEvent,
    RunEndedEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
)
from ._limits import UsageLimits, UsageMeter
from ._result import AgentResult, OutputT
from ._session import InMemorySession, RunSession
from ._store_session import StoreSession
from ._tool import Tool, check_deps_value

if TYPE_CHECKING:
    from juno_bind_trio.loop import LoopEvent
    from juno_bind_trio.run import StopSignal, ToolCallLike

    from ._output import OutputSpec
    from ._tool import Toolset

__all__ = ["AgentRun", "ModelFn", "ModelSource", "OpenRun"]

ModelFn = Callable[[ModelTurn], Awaitable[ModelTurnResult]]
"""``async (ModelTurn) -> ModelTurnResult``: one model turn, as the loop calls it."""

ModelSource = Callable[[], AbstractAsyncContextManager[ModelFn]]
"""What a run opens to get its model for its lifetime (a client opened and closed per run)."""

_to_json: Final = pydantic_core.to_json


def new_run_id() -> str:
    """A fresh run id: 32 hex digits."""
    return uuid.uuid4().hex


# --- the event seam ----------------------------------------------------------------------


@final
class _EventPipe:
    """The ordered stream between a run and its reader: synchronous in, awaited out.

    A [CoalescingSink][juno_bind_trio.completion.CoalescingSink]: the turn
    text stream writes to it as its sink, and the run's own events go on the
    same channel with ``send_nowait``, so the reader sees one order. Text
    still waiting for a busy reader merges, so memory is bounded by the text,
    not by the number of deltas, and the run never waits for the reader.

    ``put`` never raises: a reader that went away must not end the run.
    """

    __slots__ = ("_receiver", "sink")

    def __init__(self) -> None:
        self.sink: CoalescingSink[AgentEvent] = CoalescingSink(
            retractable=True, tool_call_deltas=True
        )
        self._receiver = self.sink.receiver

    def put(self, event: AgentEvent) -> None:
        # The reader left: the run goes on, or is being cancelled.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.sink.send_nowait(event)

    def close(self) -> None:
        self.sink.close()

    def close_reader(self) -> None:
        self._receiver.close()

    async def get(self) -> AgentEvent:
        """The next event; ``StopAsyncIteration`` after the last."""
        try:
            return await self._receiver.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


@final
class _FanOutSink:
    """Two sinks as one: retractable only if both are (the conservative answer)."""

    __slots__ = ("_first", "_second", "retractable")

    def __init__(self, first: TurnStreamSink, second: TurnStreamSink) -> None:
        self._first = first
        self._second = second
        self.retractable: bool = bool(first.retractable) and bool(second.retractable)

    def emit(self, event: TurnStreamEvent, /) -> None:
        try:
            self._first.emit(event)
        finally:
            self._second.emit(event)

    def emit_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
        # Each sink that shows streamed arguments gets them; the others never do.
        first = getattr(self._first, "emit_tool_call_delta", None)
        second = getattr(self._second, "emit_tool_call_delta", None)
        try:
            if first is not None:
                first(event)
        finally:
            if second is not None and self._second.retractable:
                second(event)


@final
class _LoopEvents:
    """What the loop's ``events`` port writes to: rejections become ended events."""

    __slots__ = ("_core",)

    def __init__(self, core: _RunCore[Any]) -> None:
        self._core = core

    def send_nowait(self, event: LoopEvent) -> None:
        emit = self._core.emit
        if emit is None or type(event) is not ToolCallRejectedEvent:
            return
        # Ordinary failures were reported by the dispatcher; the loop alone
        # knows which calls were refused or cut off.
        if event.kind == "not_run" or event.kind == "interrupted":
            emit(
                ToolCallEndedEvent(
                    iteration=event.iteration,
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    status=event.kind,
                    kind=event.kind,
                    content=tool_failure_content(event.message, event.kind),
                    error=event.error,
                )
            )


@final
class _Children:
    """How many sub-agent runs a run has going, for admission."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running: int = 0


@final
class _Checked:
    """A model turn's result as the structured-output retry reads it.

    ``content`` is the real text when the output validated (or the turn
    called tools); ``None`` when it did not, which is what makes
    ``retry_structured_output`` re-ask for output that parses as JSON but
    fails the output type's validation.
    """

    __slots__ = ("content", "problem", "result", "tool_calls")

    def __init__(self, result: ModelTurnResult, problem: str | None) -> None:
        self.result: ModelTurnResult = result
        self.problem: str | None = problem
        self.tool_calls: Sequence[Any] = result.tool_calls
        self.content: str | None = result.content if problem is None else None


class _ReaskRefused(Exception):
    """A re-ask the run may not make; carries the answer that did not match."""

    def __init__(self, checked: _Checked) -> None:
        super().__init__("re-ask refused")
        self.checked = checked


@final
class _Extra:
    """Requests and usage of a run the loop does not see: re-asks inside its turns."""

    __slots__ = ("cost", "input_tokens", "output_tokens", "requests")

    def __init__(self) -> None:
        self.requests: int = 0
        self.input_tokens: int = 0
        self.output_tokens: int = 0
        self.cost: float = 0.0

    def spend(self, result: ModelTurnResult, meter: UsageMeter | None, *, sign: int = 1) -> None:
        """Count (or, *sign* -1, uncount) a replaced answer's usage, here and on *meter*."""
        self.input_tokens += sign * result.input_tokens
        self.output_tokens += sign * result.output_tokens
        self.cost += sign * result.cost
        if meter is not None:
            meter.input_tokens += sign * result.input_tokens
            meter.output_tokens += sign * result.output_tokens

    def added_to(self, stats: RunStats) -> RunStats:
        """*stats* (the loop's) with these requests and this usage added."""
        if not (self.requests or self.input_tokens or self.output_tokens or self.cost):
            return stats
        return attrs.evolve(
            stats,
            model_calls=stats.model_calls + self.requests,
            input_tokens=stats.input_tokens + self.input_tokens,
            output_tokens=stats.output_tokens + self.output_tokens,
            cost=stats.cost + self.cost,
        )


def _reask(problem: str) -> str:
    return (
        f"Your answer does not match the required output: {problem}. "
        "Answer again with only the corrected JSON."
    )


# --- the run -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunSettings:
    """What an [Agent][juno_bind_trio.agent.Agent] hands each run: fixed at construction."""

    name: str | None
    model: ModelSource
    tools: tuple[Tool | Toolset, ...]
    static_tools: Mapping[str, Tool]
    static_tool_dicts: tuple[dict[str, Any], ...]
    tool_dict: Callable[[Tool], dict[str, Any]]
    instructions: str | Callable[[Any], Any] | None
    # instructions is an async function of a RunContext, awaited at the run's start.
    instructions_awaited: bool = False
    output: OutputSpec
    max_iterations: int
    per_tool_limit: int
    max_output_retries: int
    text_sink: TurnStreamSink | None
    chain_rule: ChainRule | None
    # Agent(store=...): a SQLite path or a RunStore (juno_bind_trio.store), and the lease.
    store: Any = None
    store_owner: str | None = None
    lease_ttl: float = DEFAULT_LEASE_TTL
    usage_limits: UsageLimits | None = None


@final
class _RunCore(Generic[OutputT]):
    """One run's state and the ports it gives its loop."""

    def __init__(
        self,
        settings: RunSettings,
        *,
        prompt: str | list[dict[str, Any]],
        deps: object,
        message_history: list[dict[str, Any]],
        stop: StopSignal | None,
        run_id: str,
        parent: RunContext[Any] | None,
        pipe: _EventPipe | None,
        usage_limits: UsageLimits | None = None,
    ) -> None:
        self.settings: RunSettings = settings
        limits = settings.usage_limits if usage_limits is None else usage_limits
        self.meter: UsageMeter | None = None if limits is None else UsageMeter(limits)
        self.pipe: _EventPipe | None = pipe
        emit = None if pipe is None else pipe.put
        self.deps: object = deps
        self.run_id: str = run_id
        self.parent: RunContext[Any] | None = parent
        self.emit: Callable[[AgentEvent], None] | None = emit
        # The run's own soft stop (AgentRun.stop, a usage limit), read with the caller's.
        self.own_stop: SoftStop = SoftStop()
        self.stop: StopSignal = either_stop(stop, self.own_stop)
        self.chain: ChainRef = root_chain(run_id, agent=settings.name)
        self.children: _Children = _Children()
        self.iteration: int = 0  # the run's count: a resumed run's continues its stored one
        self.loop: ToolLoop | None = None
        self.resuming: bool = False  # Agent.resume: the run is loaded from the store
        messages = list(message_history)
        instructions = settings.instructions
        if settings.instructions_awaited:
            instructions = None  # awaited when the run starts (see _await_instructions)
        elif callable(instructions):
            instructions = instructions(deps)
            if not isinstance(instructions, str):
                raise TypeError(
                    f"Agent: instructions(deps) must return a str, got {instructions!r}"
                )
        if instructions is not None and not (
            messages
            and messages[0].get("role") == "system"
            and messages[0].get("content") == instructions
        ):
            messages.insert(0, {"role": "system", "content": instructions})
        # new_messages: this run's part starts at its prompt (the history is healed
        # before it gets here, and the loop only appends).
        self.new_start: int = len(messages)
        messages.append({"role": "user", "content": prompt})
        self.state: LoopState = LoopState(messages)
        self.tools: Mapping[str, Tool] = settings.static_tools
        self.tool_dicts: tuple[dict[str, Any], ...] = settings.static_tool_dicts
        self.model: ModelFn | None = None
        # What the loop's RunStats cannot see: the structured-output re-asks made
        # inside turns, and the usage of the answers they replaced.
        self.extra: _Extra = _Extra()
        # A turn whose answer did not match the output type, and whose re-ask the
        # run may not make (a stop, a usage limit): the re-ask it is owed.
        self.reask_owed: str | None = None

    # --- the seams ----------------------------------------------------------------

    def build_loop(self, session: RunSession) -> ToolLoop:
        """The run's one ToolLoop on *session*, every port named here."""
        settings = self.settings
        sink: TurnStreamSink | None = settings.text_sink
        if self.pipe is not None:
            reader: TurnStreamSink = self.pipe.sink
            sink = reader if sink is None else _FanOutSink(reader, sink)
        serial = any(t.serial for t in self.tools.values())
        return ToolLoop(
            state=self.state,
            max_iterations=settings.max_iterations,
            call_model=session.wrap_call_model(self.call_model),
            run_tool_call=session.wrap_tool_call(self.dispatch),
            build_tools=self.build_tools,
            runs_serially=self.runs_serially if serial else None,
            on_turn_would_end=None if settings.output.text else self.turn_would_end,
            should_stop=None if self.meter is None else self._over_limit,
            is_fatal_tool_error=_is_usage_error,
            save_session=session.save_session,
            stop=either_stop(self.stop, session.stop),
            events=_LoopEvents(self) if self.emit is not None else None,  # type: ignore[arg-type]
            text_sink=sink,
            run_id=self.run_id,
            first_iteration=session.first_iteration,
            per_tool_limit=settings.per_tool_limit,
        )

    async def dispatch(self, given: ToolCallLike) -> ToolCallOutcome:
        """Run one tool call: look the tool up, validate, run, convert, report."""
        # The loop hands over its ToolCall; a resume's call is read once, here.
        call = ToolCall.of(given)
        call_id = call.id
        name = call.name
        arguments = call.arguments
        found = self.tools.get(name)
        emit = self.emit
        iteration = self.iteration
        began: list[bool] = []

        # Called by the tool once the arguments validated, right before it runs.
        def on_start() -> None:
            began.append(True)
            if emit is not None:
                emit(ToolCallStartedEvent(iteration, call_id, name, arguments))

        try:
            if found is None:
                found = self._unknown_tool(name)
            ctx = RunContext(
                deps=self.deps,
                run_id=self.run_id,
                tool_call_id=call_id,
                tool_name=name,
                iteration=iteration,
                chain=self.chain,
                arguments=arguments,
                call=call,
                children=self.children,
                on_start=on_start,
            )
            value = await found.invoke(ctx, call)
            if type(value) is str:
                content = value
            elif isinstance(value, ToolCallOutcome):
                if emit is not None:
                    emit(self._ended(iteration, call_id, name, "finished", None, value))
                return value
            else:
                try:
                    content = _to_json(value).decode()
                except pydantic_core.PydanticSerializationError as exc:
                    raise ToolFailureError(
                        "system",
                        f"the tool returned a {type(value).__name__}, which cannot be "
                        f"written as JSON ({exc})",
                    ) from None
        except Exception as exc:
            # Cut off by a cancel (or never begun): the loop answers it and
            # reports that. A wiring mistake ends the run and speaks for itself.
            if not cancelled_now():
                kind = kind_for_error(exc)
                if not isinstance(exc, UsageError):
                    self._log_failure(iteration, call_id, name, arguments, kind, exc, bool(began))
                if emit is not None:
                    emit(self._failed(iteration, call_id, name, exc, kind))
            raise
        outcome = ToolCallOutcome(tool_message=tool_message(call_id, content))
        if emit is not None:
            emit(self._ended(iteration, call_id, name, "finished", None, outcome))
        return outcome

    def _log_failure(
        self,
        iteration: int,
        call_id: str,
        name: str,
        arguments: str,
        kind: Any,
        exc: Exception,
        ran: bool,
    ) -> None:
        # The model reads the failure in the tool message; this is the developer's
        # copy. The tool's own exception comes with its traceback; a call refused
        # before the tool ran (no such tool, arguments that did not validate) is
        # said in one line, its reason. Arguments are content: only when content is on.
        what = "failed" if ran else "refused before it ran"
        if _tracing.capture_content():
            _tracing.logger.warning(
                "run %s: tool %s %s (call %s, iteration %d, kind %s, arguments %s): %s",
                self.run_id,
                name,
                what,
                call_id,
                iteration,
                kind,
                arguments,
                tool_error_text(exc),
                exc_info=exc if ran else None,
            )
        else:
            _tracing.logger.warning(
                "run %s: tool %s %s (call %s, iteration %d, kind %s): %s",
                self.run_id,
                name,
                what,
                call_id,
                iteration,
                kind,
                tool_error_text(exc),
                exc_info=exc if ran else None,
            )

    def _unknown_tool(self, name: str) -> Tool:
        raise ToolFailureError(
            "not_found",
            f"there is no tool named {name!r}; the tools are: "
            + (", ".join(sorted(self.tools)) or "none"),
        )

    async def call_model(self, turn: ModelTurn) -> ModelTurnResult:
        """One model turn; structured output is validated and re-asked here."""
        self.iteration = turn.iteration  # the loop numbers its turns as the run does
        model = self.model
        assert model is not None
        output = self.settings.output
        meter = self.meter
        if meter is not None:
            meter.requests += 1
        if output.text:
            result = await model(turn)
        else:
            result = await self._structured_turn(model, turn, output)
        # A model that returned something else is the loop's to refuse (UsageError).
        answered: object = result
        if not isinstance(answered, ModelTurnResult):
            return result
        if meter is not None and not meter.answered(answered):
            # Past a limit: none of this response's calls runs (the loop answers
            # each not_run) and the run ends before another request.
            self.own_stop.cancel()
        stream = turn.text_stream
        if stream is not None:
            # The turn's text is over: finished here, before the turn's end is
            # reported, so a reset still armed (an earlier attempt streamed text,
            # the last none) reaches the reader before the TurnEndedEvent. A
            # re-ask the run may not make leaves the rejected answer up, as the
            # transcript has it. (The loop's own finish is then a no-op.)
            stream.finish("failed" if self.reask_owed is not None else "succeeded")
        if self.emit is not None:
            self.emit(
                TurnEndedEvent(self.iteration, turn.turn_id, result.content, len(result.tool_calls))
            )
        return result

    async def turn_would_end(self, result: ModelTurnResult) -> bool:
        """The loop's ``on_turn_would_end``: a re-ask the run could not make goes on record.

        The answer that did not match the output type is in the transcript
        (the loop appended it); the re-ask is appended after it, so a run
        continued from this transcript, or resumed from its store, asks the
        model exactly what it was about to. Going on brings the loop back to
        its stop and limit checks, which end the run before another request.
        """
        owed = self.reask_owed
        if owed is None:
            return False
        self.reask_owed = None
        self.state.messages.append({"role": "user", "content": _reask(owed)})
        return True

    # --- the pieces -------------------------------------------------------------

    async def _await_instructions(self) -> None:
        # Before the first request (and before a durable run is first stored): the
        # run's own context, at no tool call yet (empty call id and name, iteration 0).
        function = self.settings.instructions
        assert callable(function)
        ctx: RunContext[Any] = RunContext(
            deps=self.deps,
            run_id=self.run_id,
            tool_call_id="",
            tool_name="",
            iteration=0,
            chain=self.chain,
            children=self.children,
        )
        text = await function(ctx)
        if not isinstance(text, str):
            raise TypeError(f"Agent: instructions(ctx) must return a str, got {text!r}")
        messages = self.state.messages
        if not (
            messages and messages[0].get("role") == "system" and messages[0].get("content") == text
        ):
            messages.insert(0, {"role": "system", "content": text})
            self.new_start += 1

    def _over_limit(self) -> bool:
        # The loop asks before every model request: end the run rather than make it.
        meter = self.meter
        return meter is not None and not meter.may_request()

    def build_tools(self) -> Sequence[dict[str, Any]]:
        return self.tool_dicts

    def runs_serially(self, call: ToolCallLike) -> bool:
        found = self.tools.get(tool_call_name(call))
        return found is not None and found.serial

    @staticmethod
    def _ended(
        iteration: int, call_id: str, name: str, status: Any, kind: Any, outcome: ToolCallOutcome
    ) -> ToolCallEndedEvent:
        content = outcome.tool_message.get("content")
        return ToolCallEndedEvent(
            iteration=iteration,
            tool_call_id=call_id,
            tool_name=name,
            status=status,
            kind=kind,
            content=content if isinstance(content, str) else str(content),
        )

    @staticmethod
    def _failed(
        iteration: int, call_id: str, name: str, error: Exception, kind: Any
    ) -> ToolCallEndedEvent:
        return ToolCallEndedEvent(
            iteration=iteration,
            tool_call_id=call_id,
            tool_name=name,
            status="failed",
            kind=kind,
            content=tool_failure_content(tool_error_text(error), kind),
            error=error,
        )

    def _may_reask(self) -> bool:
        # A re-ask is a request like any other: never after a soft stop, never past a limit.
        if self.stop.cancel_called:
            return False
        meter = self.meter
        return meter is None or meter.may_request()

    async def _structured_turn(
        self, model: ModelFn, turn: ModelTurn, output: OutputSpec
    ) -> ModelTurnResult:
        last: list[_Checked] = []
        extra = self.extra
        meter = self.meter

        async def produce(rejected: _Checked | None) -> _Checked:
            asked = turn
            if rejected is not None:
                assert rejected.problem is not None
                # The rejected answer's usage counts from now: the re-ask is
                # checked against it, and the loop never sees that answer.
                extra.spend(rejected.result, meter)
                if not self._may_reask():
                    extra.spend(rejected.result, meter, sign=-1)  # the turn's result after all
                    raise _ReaskRefused(rejected)
                # No request is made under a pending cancel, a re-ask no more than
                # a turn: the model function would start its work before its
                # first await saw the cancellation.
                await checkpoint_if_cancelled()
                extra.requests += 1
                if meter is not None:
                    meter.requests += 1
                _tracing.run_event(
                    "juno.output.retry", {"juno.output.problem": rejected.problem[:500]}
                )
                # Only the answer that validates enters the transcript.
                asked = turn.with_extra_messages(
                    [
                        {"role": "assistant", "content": rejected.result.content},
                        {"role": "user", "content": _reask(rejected.problem)},
                    ]
                )
            result: object = await model(asked)
            if not isinstance(result, ModelTurnResult) or result.tool_calls:
                checked = _Checked.__new__(_Checked)
                checked.result = result  # type: ignore[assignment]  # the loop refuses it
                checked.problem = None
                checked.tool_calls = getattr(result, "tool_calls", ())
                checked.content = getattr(result, "content", None)
            else:
                checked = _Checked(result, output.problem(result.content))
            last.append(checked)
            return checked

        try:
            checked = await retry_structured_output(
                produce,
                response_format=output.response_format,
                stream=turn.text_stream,
                max_retries=self.settings.max_output_retries,
            )
        except _ReaskRefused as refused:
            # The run ends without the re-ask; the answer stays the turn's, and
            # the re-ask goes on record (see turn_would_end).
            self.reask_owed = refused.checked.problem
            return refused.checked.result
        except StructuredOutputError as exc:
            final = last[-1]
            raise StructuredOutputError(
                f"no answer matched the output type in {exc.attempts} attempts; the last: "
                f"{final.problem}",
                exc.attempts,
                final.result.content,
            ) from None
        return checked.result

    # --- the whole run ------------------------------------------------------------

    def _collect_tools(self) -> None:
        settings = self.settings
        if all(not _is_toolset(t) for t in settings.tools):
            return
        tools: dict[str, Tool] = {}
        for item in settings.tools:
            group: list[Tool] = [item] if isinstance(item, Tool) else list(item.tools)
            for each in group:
                if not isinstance(each, Tool):
                    raise UsageError(
                        f"Agent.run: a toolset's tools must be Tool objects, got {each!r}"
                    )
                if each.name in tools and tools[each.name] is not each:
                    raise UsageError(
                        f"Agent.run: two tools are named {each.name!r} (a toolset's tools are "
                        "read at the start of each run); rename one"
                    )
                tools[each.name] = each
        # A toolset's tools are known only now: their RunContext[X] checked against deps.
        check_deps_value("Agent.run", tools.values(), self.deps)
        self.tools = tools
        self.tool_dicts = tuple(settings.tool_dict(t) for t in tools.values())

    def _open_session(self) -> AbstractAsyncContextManager[RunSession]:
        """The run's session: in memory, or on the agent's store."""
        settings = self.settings
        if settings.store is None:
            return contextlib.nullcontext(InMemorySession(self.state, self.chain))
        tools = self.tools

        def resumability(name: str) -> EffectResumability:
            found = tools.get(name)
            return "repeatable" if found is not None and found.repeatable else "non_repeatable"

        def uses_key(name: str) -> bool:
            found = tools.get(name)
            return found is not None and found.uses_idempotency_key

        return StoreSession.open(
            settings.store,
            run_id=self.run_id,
            messages=self.state.messages,
            chain=self.chain,
            agent=settings.name,
            resume=self.resuming,
            owner=settings.store_owner or default_owner(),
            lease_ttl=settings.lease_ttl,
            resumability=resumability,
            uses_idempotency_key=uses_key,
        )

    async def _run_on(self, session: RunSession) -> LoopResult:
        """The run's life on *session*, plain or durable alike: start from its state,
        answer its open turn, run the one loop, record the end."""
        self.state = session.state
        self.chain = session.chain
        if session.resumed:  # new_messages: what this resume adds after the loaded transcript
            self.new_start = len(self.state.messages)
        # RunContext.iteration is the run's own count: the open turn's calls belong
        # to its iteration, and the loop's turns continue after it.
        open_turn = session.open_turn_iteration
        if open_turn is not None:
            self.iteration = open_turn
        serial = any(t.serial for t in self.tools.values())
        ended = await session.answer_open_turn(
            self.dispatch,
            per_tool_limit=self.settings.per_tool_limit,
            runs_serially=self.runs_serially if serial else None,
        )
        if ended is not None:
            return ended
        loop = self.loop = self.build_loop(session)
        result = await loop.run()
        await session.finish(result.reason)
        return result

    async def run(self) -> AgentResult[OutputT]:
        """Run to the end and return the result; cancellation propagates."""
        parent = self.parent
        counter: _Children | None = None
        if parent is not None:
            counter = parent._children
            admission = admit_child_run(
                parent.chain,
                self.run_id,
                child_agent=self.settings.name,
                running_children=counter.running if counter is not None else 0,
                rule=self.settings.chain_rule,
            )
            if not admission.admitted:
                raise ToolFailureError("conflict", admission.detail)
            assert admission.chain is not None
            self.chain = admission.chain
            if counter is not None:
                counter.running += 1
        try:
            if self.settings.instructions_awaited and not self.resuming:
                await self._await_instructions()
            self._collect_tools()
            # The run's span is current for the whole run: the loop records on it
            # (it opens none of its own for this run id), the loop's tool spans and
            # the model's chat spans parent under it, and a sub-agent run started in
            # a tool parents under that tool call's span.
            with _tracing.run_span(self.run_id, agent=self.settings.name or "agent"):
                async with self.settings.model() as model, self._open_session() as session:
                    self.model = model
                    result = await self._run_on(session)
        finally:
            if counter is not None:
                counter.running -= 1
        output: Any
        if result.reason == "completed":
            output = self.settings.output.read(result.content)
        elif self.settings.output.text:
            output = result.content or ""
        else:
            output = None
        agent_result: AgentResult[Any] = AgentResult(
            output=output,
            messages=self.state.messages,
            new_start=min(self.new_start, len(self.state.messages)),
            reason=result.reason,
            stats=self.extra.added_to(result.stats),
            run_id=self.run_id,
            iterations=result.iterations,
            suspensions=result.suspensions,
        )
        exceeded = None if self.meter is None else self.meter.exceeded
        if exceeded is not None:
            raise UsageLimitExceeded(*exceeded, result=agent_result)
        return agent_result


def _is_toolset(item: object) -> bool:
    return not isinstance(item, Tool)


def _is_usage_error(error: BaseException) -> bool:
    # A wiring mistake is the host's to fix, never a message for the model.
    return isinstance(error, UsageError)


# --- what open_run yields ------------------------------------------------------------------


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
        "_turn_id",
        "_view",
        "result",
    )

    def __init__(self, core: _RunCore[OutputT], pipe: _EventPipe) -> None:
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

    def __repr__(self) -> str:
        return f"<AgentRun run_id={self._core.run_id!r} ended={self.result is not None}>"

    @property
    def run_id(self) -> str:
        """This run's id."""
        return self._core.run_id

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
            value = self._core.settings.output.partial(text, complete=view.final)
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

    def __init__(self, core: _RunCore[OutputT], pipe: _EventPipe) -> None:
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
    core: _RunCore[OutputT], pipe: _EventPipe
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
