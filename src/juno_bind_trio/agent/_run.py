"""One agent run's life: the ToolLoop it builds on its session, and the two ports it gives it.

Every run is exactly one [ToolLoop][juno_bind_trio.loop.ToolLoop]; this module
adds nothing to the kernel's control flow. Where the run's state lives (in
memory, in a store) is its [RunSession][juno_bind_trio.agent.RunSession], and
plain and durable runs take the one path ``_RunCore._run_on``:

* ``_RunCore.build_loop`` builds the loop on the session: every
  port the run uses is named there, ``save_session`` included.
* ``_RunCore.dispatch`` is the only way a tool runs:
  name lookup, the [RunContext][juno_bind_trio.agent.RunContext], the tool, the conversion of
  its return value into the tool message, and the started/ended events
  (``_tool_report``). Receipts are recorded around it, by the session.
* ``_RunCore.call_model`` is the only way the model is called: the
  structured-output re-ask (``_reask``) lives there, around the model, inside the turn.

Its reader's events go through ``_pipe``; the handle a reader holds is ``_handle``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Final, Generic, final

import attrs
import pydantic_core

from juno_bind_trio import _tracing
from juno_bind_trio._cancel import cancelled_now
from juno_bind_trio._errors import (
    GuardrailTripped,
    ToolFailureError,
    UsageError,
    UsageLimitExceeded,
)
from juno_bind_trio.completion import TurnStreamSink
from juno_bind_trio.loop import (
    LoopResult,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    RunStats,
    ToolCallOutcome,
    ToolLoop,
)
from juno_bind_trio.plugins import kind_for_error
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

from ._approval_decisions import Decision
from ._approvals import ApprovalGate, bind_gate, check_continuation, result_pending
from ._context import RunChildren, RunContext
from ._events import AgentEvent, ToolCallStartedEvent, TurnEndedEvent
from ._guardrails import checked_output, guarded_first_request, tripped_result
from ._handoff import HandoffSpec
from ._handover import (
    Handover,
    accepted,
    compaction_in_charge,
    loop_ended,
    persist_port,
    run_models,
    take_charge,
)
from ._history import on_conversation
from ._instructions import at_construction, head_with, take_instructions
from ._limits import UsageLimits, UsageMeter
from ._output_plan import NO_VALUE
from ._pipe import EventPipe, FanOutSink, LoopEvents
from ._reask import Extra, answer_of, reask_message
from ._result import AgentResult, OutputT
from ._session import InMemorySession, RunSession
from ._steps import collect_tools, offered_only, open_turn_port, shape_turn, step_tools
from ._store_session import StoreSession, continue_in_conversation
from ._tool import Tool
from ._tool_guards import OpenTurnGuards, after_guards, open_turn_guards, refusing_calls
from ._tool_report import log_tool_failure, tool_ended, tool_failed

if TYPE_CHECKING:
    from juno_bind_trio.run import StopSignal, ToolCallLike
    from juno_bind_trio.schema import SchemaDialect

    from ._compaction import Compaction
    from ._guardrails import InputGuardrail, OutputGuardrail
    from ._output_plan import OutputPlan
    from ._prepare import PrepareToolsFn, StepTools
    from ._processors import Processors
    from ._tool import Toolset
    from ._tool_guards import ToolGuard

__all__ = ["ModelFn", "ModelSource", "RunSettings", "new_run_id"]

ModelFn = Callable[[ModelTurn], Awaitable[ModelTurnResult]]
"""``async (ModelTurn) -> ModelTurnResult``: one model turn, as the loop calls it."""

ModelSource = Callable[[], AbstractAsyncContextManager[ModelFn]]
"""What a run opens to get its model for its lifetime (a client opened and closed per run)."""

_to_json: Final = pydantic_core.to_json


def new_run_id() -> str:
    """A fresh run id: 32 hex digits."""
    return uuid.uuid4().hex


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
    output: OutputPlan
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
    handoffs: tuple[HandoffSpec, ...] = ()  # Agent(handoffs=...): see _handoff
    input_guardrails: tuple[InputGuardrail, ...] = ()
    output_guardrails: tuple[OutputGuardrail, ...] = ()
    tool_guards: tuple[ToolGuard, ...] = ()
    # #33: the schema dialect of the tools, the tools of each step, what each request is sent.
    dialect: SchemaDialect = "openai"
    prepare_tools: PrepareToolsFn | None = None
    history_processors: Processors | None = None
    compaction: Compaction | None = None


@final
class _RunCore(Generic[OutputT]):
    """One run's state and the ports it gives its loop."""

    def __init__(
        self,
        settings: RunSettings,
        *,
        prompt: str | list[dict[str, Any]] | None,
        deps: object,
        message_history: list[dict[str, Any]],
        stop: StopSignal | None,
        run_id: str,
        parent: RunContext[Any] | None,
        pipe: EventPipe | None,
        usage_limits: UsageLimits | None = None,
        decisions: Mapping[str, Decision] | None = None,
        conversation: str | None = None,
    ) -> None:
        self.settings: RunSettings = settings
        self.agent: RunSettings = settings  # in charge: a handoff's target after one
        self.handover: Handover | None = Handover(self) if settings.handoffs else None
        # Agent.run(conversation=...): the history is the store's, read when the run starts.
        self.conversation: str | None = conversation
        # #31: the calls that wait for a decision, and the decisions given to this run.
        self.gate: ApprovalGate = ApprovalGate(decisions)
        limits = settings.usage_limits if usage_limits is None else usage_limits
        self.meter: UsageMeter | None = None if limits is None else UsageMeter(limits)
        self.pipe: EventPipe | None = pipe
        emit = None if pipe is None else pipe.put
        self.deps: object = deps
        self.run_id: str = run_id
        self.parent: RunContext[Any] | None = parent
        self.emit: Callable[[AgentEvent], None] | None = emit
        # The run's own soft stop (AgentRun.stop, a usage limit), read with the caller's.
        self.own_stop: SoftStop = SoftStop()
        self.stop: StopSignal = either_stop(stop, self.own_stop)
        self.chain: ChainRef = root_chain(run_id, agent=settings.name)
        self.children: RunChildren = RunChildren()
        self.iteration: int = 0  # the run's count: a resumed run's continues its stored one
        self.loop: ToolLoop | None = None
        self.resuming: bool = False  # Agent.resume: the run is loaded from the store
        self.conversation_read = False  # continue_in_conversation looked for a waiting run
        messages = list(message_history)
        instructions = at_construction(settings, deps)  # see _instructions
        self.instructions_text: str | None = instructions  # first: a handoff replaces it
        if instructions is not None:
            head_with(messages, instructions)
        # new_messages: this run's part starts at its prompt (the history is healed
        # before it gets here, and the loop only appends).
        self.new_start: int = len(messages)
        if prompt is not None:  # None: a run in memory continuing its history's waiting calls
            messages.append({"role": "user", "content": prompt})
        self.prompted: bool = prompt is not None
        self.state: LoopState = LoopState(messages)
        self.tools: Mapping[str, Tool] = settings.static_tools
        self.tool_dicts: tuple[dict[str, Any], ...] = settings.static_tool_dicts
        self.model: ModelFn | None = None  # the agent's (a handoff's target's: see Handover)
        # What the loop's RunStats cannot see: the structured-output re-asks made
        # inside turns, and the usage of the answers they replaced.
        self.extra: Extra = Extra()
        # A turn whose answer did not match the output type, and whose re-ask the
        # run may not make (a stop, a usage limit): the re-ask it is owed.
        self.reask_owed: str | None = None
        # The accepted answer's value (an output function's return): the run's output.
        self.output_value: Any = NO_VALUE
        self.output_problem: str | None = None
        # #33: the per-step tools (None: all, always); what the last step offered (None: all).
        self.step_tools: StepTools | None = None
        self.offered: Mapping[str, Tool] | None = None
        self.turn_guards: OpenTurnGuards | None = None  # a store session's screen

    # --- the seams ----------------------------------------------------------------

    def build_loop(self, session: RunSession) -> ToolLoop:
        """The run's one ToolLoop on *session*, every port named here."""
        settings = self.settings
        sink: TurnStreamSink | None = settings.text_sink
        if self.pipe is not None:
            reader: TurnStreamSink = self.pipe.sink
            sink = reader if sink is None else FanOutSink(reader, sink)
        serial = self.handover is not None or any(t.serial for t in self.tools.values())
        run_tool_call = session.wrap_tool_call(self.dispatch)
        gate = self.gate
        # Outside the receipts: a waiting call has none. With handoffs, always: a target's
        # tools may wait for a decision though the starting agent's never do.
        if gate.active or self.handover is not None:
            run_tool_call = gate.outer(session.wrap_tool_call(gate.inner(self.dispatch)))
        run_tool_call = refusing_calls(self, run_tool_call)  # outside the receipts too
        run_tool_call = offered_only(self, run_tool_call)  # outermost: a hidden tool is not there
        needs, apply = compaction_in_charge(self)  # the agent in charge's
        return ToolLoop(
            state=self.state,
            max_iterations=settings.max_iterations,
            call_model=session.wrap_call_model(self.call_model),
            run_tool_call=run_tool_call,
            build_tools=self.build_tools,
            runs_serially=self.runs_serially if serial else None,
            on_turn_would_end=None if settings.output.text and not serial else self.turn_would_end,
            should_stop=None if self.meter is None else self._over_limit,
            is_fatal_tool_error=_is_usage_error,
            needs_compaction=needs,
            apply_compaction=apply,
            save_session=persist_port(self.handover, session),
            stop=either_stop(self.stop, session.stop),
            events=LoopEvents(self.emit) if self.emit is not None else None,  # type: ignore[arg-type]
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
            value = accepted(self.handover, value, call_id)  # a handoff's call: its answer
            if self.agent.tool_guards or found.guards:  # the agent in charge's
                value = await after_guards(self, ctx, found, value)
            if type(value) is str:
                content = value
            elif isinstance(value, ToolCallOutcome):
                if emit is not None:
                    emit(tool_ended(iteration, call_id, name, "finished", None, value))
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
                    log_tool_failure(
                        self.run_id, iteration, call_id, name, arguments, kind, exc, bool(began)
                    )
                if emit is not None:
                    emit(tool_failed(iteration, call_id, name, exc, kind))
            raise
        outcome = ToolCallOutcome(tool_message=tool_message(call_id, content))
        if emit is not None:
            emit(tool_ended(iteration, call_id, name, "finished", None, outcome))
        return outcome

    def _unknown_tool(self, name: str) -> Tool:
        if name in self.agent.output.tool_names:
            raise ToolFailureError(
                "validation",
                f"invalid arguments for {name}: {self.output_problem or 'not accepted'}; "
                f"call {name} again with corrected arguments",
            )
        raise ToolFailureError(
            "not_found",
            f"there is no tool named {name!r}; the tools are: "
            + (", ".join(sorted(self.tools)) or "none"),
        )

    async def call_model(self, turn: ModelTurn) -> ModelTurnResult:
        """One model turn; structured output is validated and re-asked here."""
        self.iteration = turn.iteration  # the loop numbers its turns as the run does
        if self.step_tools is not None or self.agent.history_processors is not None:
            turn = await shape_turn(self, turn)
        meter = self.meter
        if meter is not None:
            meter.requests += 1
        result = await answer_of(self, turn)
        if self.agent.output_guardrails:  # the agent in charge's
            result = await checked_output(self, turn, result)
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
        if self.reask_owed is not None and result.tool_calls:
            # A final-answer call the run may not re-ask: the call is answered
            # with its problem (see _unknown_tool), which puts the re-ask on record.
            self.output_problem = self.reask_owed
            self.reask_owed = None
        if self.emit is not None:
            calls, agent = len(result.tool_calls), self.agent.name  # the agent speaking
            self.emit(TurnEndedEvent(self.iteration, turn.turn_id, result.content, calls, agent))
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
        self.state.messages.append({"role": "user", "content": reask_message(owed)})
        return True

    # --- the pieces -------------------------------------------------------------

    def _over_limit(self) -> bool:
        # The loop asks before every model request: end the run rather than make it.
        meter = self.meter
        return meter is not None and not meter.may_request()

    def build_tools(self) -> Sequence[dict[str, Any]]:
        answer = self.agent.output.tool_definitions
        return (*self.tool_dicts, *answer) if answer else self.tool_dicts

    def runs_serially(self, call: ToolCallLike) -> bool:
        found = self.tools.get(tool_call_name(call))
        return found is not None and found.serial

    # --- the whole run ------------------------------------------------------------

    def _open_session(self) -> AbstractAsyncContextManager[RunSession]:
        """The run's session: in memory, or on the agent's store."""
        settings = self.settings
        if settings.store is None:
            return contextlib.nullcontext(InMemorySession(self.state, self.chain))
        # A resumed open turn's calls meet the tool guards before their receipts.
        self.turn_guards = open_turn_guards(self)

        def resumability(name: str) -> EffectResumability:
            found = self.tools.get(name)
            return "repeatable" if found is not None and found.repeatable else "non_repeatable"

        def uses_key(name: str) -> bool:
            found = self.tools.get(name)
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
            gate=self.gate,
            conversation=self.conversation,
            with_history=self.with_history,
            screen=None if self.turn_guards is None else self.turn_guards.screen,
        )

    async def with_history(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The run's first transcript on a conversation (``_history.on_conversation``):
        with handoffs, under the instructions of the agent in charge of *history*."""
        if self.handover is not None:
            await take_instructions(self, history)
        messages, self.new_start = on_conversation(history, self.state.messages, self.new_start)
        self.state = LoopState(messages)
        check_continuation(self.gate, messages[: self.new_start], prompted=self.prompted)
        return messages

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
        handover = await take_charge(self.handover, session)  # who is in charge
        serial = any(t.serial for t in self.tools.values())
        if not session.resumed and self.gate.waiting:
            # A run in memory continuing the waiting calls its history ends with.
            held = await self.gate.settle_trailing(
                self.state.messages,
                refusing_calls(self, self.dispatch),
                per_tool_limit=self.settings.per_tool_limit,
                end=self.new_start,  # a new prompt after the history is not its last turn
            )
            if held:
                await session.finish("suspended")
                return LoopResult(reason="suspended", iterations=0, stats=RunStats(), content=None)
        answer = self.gate.inner(self.dispatch) if self.gate.active else self.dispatch
        # A resumed call is checked as any: by the session's screen, before its receipt,
        # when the session shows it one (a store's), else here.
        answer = refusing_calls(self, answer, screened=self.turn_guards)
        if open_turn is not None:  # its calls run as they would have: its step's tools only
            answer = await open_turn_port(self, answer, open_turn)
        ended = await session.answer_open_turn(
            answer,
            per_tool_limit=self.settings.per_tool_limit,
            runs_serially=self.runs_serially if serial else None,
        )
        if ended is not None:
            return ended
        if handover is not None:  # the open turn may have been the handoff's
            await handover.finish_open_turn()
        loop = self.loop = self.build_loop(session)
        result = await loop.run()
        await loop_ended(self.handover, result.reason)
        await session.finish(result.reason)
        return result

    async def run(self) -> AgentResult[OutputT]:
        """Run to the end and return the result; cancellation propagates."""
        parent = self.parent
        counter: RunChildren | None = None
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
            await continue_in_conversation(self)  # decisions: the stored run resumes
            settings = self.settings
            deferred = settings.instructions_awaited or bool(settings.handoffs)
            # A conversation's, with handoffs: once its history is read (with_history).
            if deferred and not self.resuming and (self.handover is None or not self.conversation):
                await take_instructions(self, self.state.messages[: self.new_start])
            collect_tools(self)
            self.step_tools = step_tools(self)
            bind_gate(self)
            # The run's span is current for the whole run: the loop records on it
            # (it opens none of its own for this run id), the loop's tool spans and
            # the model's chat spans parent under it, and a sub-agent run started in
            # a tool parents under that tool call's span.
            with _tracing.run_span(self.run_id, agent=self.settings.name or "agent"):
                async with run_models(self) as model, self._open_session() as session:
                    self.model = guarded_first_request(model, self)
                    result = await self._run_on(session)
        except GuardrailTripped as tripped:
            tripped.result = tripped_result(self)
            raise
        finally:
            if counter is not None:
                counter.running -= 1
        output: Any
        if result.reason == "completed":
            output = self.output_value
            if output is NO_VALUE:
                output = self.agent.output.read(result.content)
        elif self.agent.output.text:
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
            pending=result_pending(self.gate, result.reason, result.suspensions),
            agent_name=self.agent.name,
            handoffs=() if self.handover is None else self.handover.record(),
        )
        exceeded = None if self.meter is None else self.meter.exceeded
        if exceeded is not None:
            raise UsageLimitExceeded(*exceeded, result=agent_result)
        return agent_result


def _is_usage_error(error: BaseException) -> bool:
    # A wiring mistake is the host's to fix, never a message for the model.
    return isinstance(error, UsageError)
