"""Input and output guardrails: checks that end a run, run beside its model call, not before it.

A guardrail is a function of ``(ctx, input)`` returning a
[GuardrailResult][juno_bind_trio.agent.GuardrailResult]. What makes it worth
a module is *when* it runs, and what a trip may leave behind.

An input guardrail checks what the first request is about to send. Run
before the request, it adds its own latency to every run; run beside it, it
costs nothing unless it trips. So the first request runs inside a task group
whose children are the guardrails (the request in the run's own task, a task
for each guardrail): the guardrail that trips first cancels the group's
scope, and the request stops at its next checkpoint, so no token is read
after the trip. The request's answer is held until every guardrail has
passed, which is the whole guarantee: the answer is never committed to the
transcript, and no tool of it starts, unless every input guardrail said so.
A guardrail that passes late delays only that first answer, never beyond
its own finish. ``blocking=True`` makes one guardrail a gate instead: the
request starts once every blocking guardrail has passed.

An output guardrail checks the final answer before the run returns it. The
answer may have reached the reader's screen already; a trip takes it back
with a reset (reason ``"guardrail"``) delivered before the run's
``GuardrailTripped`` leaves, or asks the model again (``on_trip="reask"``),
which the reader sees as the same reset followed by the new answer.

Everything that leaves here leaves as itself: the trip as
``GuardrailTripped``, a guardrail's own exception as that exception, a
cancel as a cancel; never an exception group.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, final, overload

import anyio
import anyio.to_thread

from juno_bind_trio import _tracing
from juno_bind_trio._cancel import (
    TaskGroup,
    cancelled_now,
    checkpoint_if_cancelled,
    one_failure,
    open_task_group,
    split_cancellations,
)
from juno_bind_trio._errors import GuardrailTripped, UsageError
from juno_bind_trio._validate import is_async_callable, shown
from juno_bind_trio.loop import ModelTurnResult, RunStats

from ._context import RunContext
from ._output_plan import NO_VALUE
from ._reask import answer_of
from ._result import AgentResult
from ._tool_guards import ToolGuard
from ._verdict import GuardrailResult

if TYPE_CHECKING:
    from juno_bind_trio.completion import TurnTextStream
    from juno_bind_trio.loop import ModelTurn

    from ._run import ModelFn, _RunCore

__all__ = [
    "InputGuardrail",
    "OutputGuardrail",
    "ToolGuard",
    "check_input_guardrails",
    "check_output_guardrails",
    "checked_output",
    "guarded_first_request",
    "input_guardrail",
    "output_guardrail",
    "tripped_result",
]

GuardrailFunction: TypeAlias = Callable[..., Any]
"""``(ctx, input) -> GuardrailResult``, ``async`` or not (a synchronous one runs in a thread)."""

OnTrip: TypeAlias = Literal["raise", "reask"]


def _named(owner: str, function: object, name: object) -> str:
    if name is None:
        name = getattr(function, "__name__", None) or type(function).__name__
    if not isinstance(name, str) or not name:
        raise TypeError(f"{owner}: name must be a non-empty str or None, got {shown(name)}")
    return name


def _checked_function(owner: str, function: object) -> Callable[..., Any]:
    if not callable(function):  # a guardrail made already is no function either
        raise TypeError(
            f"{owner}: expected a function of (ctx, input) returning a GuardrailResult, "
            f"got {shown(function)}"
        )
    return function


@final
class InputGuardrail:
    """A check of a run's input, beside its first model request: made by
    [input_guardrail][juno_bind_trio.agent.input_guardrail]."""

    __slots__ = ("blocking", "function", "is_async", "name")

    def __init__(
        self, function: GuardrailFunction, *, name: str | None = None, blocking: bool = False
    ) -> None:
        owner = "InputGuardrail"
        self.function: GuardrailFunction = _checked_function(owner, function)
        self.name: str = _named(owner, function, name)
        if not isinstance(blocking, bool):
            raise TypeError(f"{owner}: blocking must be a bool, got {shown(blocking)}")
        self.blocking: bool = blocking
        self.is_async: bool = is_async_callable(function)

    def __repr__(self) -> str:
        return f"<InputGuardrail {self.name!r} blocking={self.blocking}>"


@final
class OutputGuardrail:
    """A check of a run's final output before the run returns it: made by
    [output_guardrail][juno_bind_trio.agent.output_guardrail]."""

    __slots__ = ("function", "is_async", "name", "on_trip")

    def __init__(
        self, function: GuardrailFunction, *, name: str | None = None, on_trip: OnTrip = "raise"
    ) -> None:
        owner = "OutputGuardrail"
        self.function: GuardrailFunction = _checked_function(owner, function)
        self.name: str = _named(owner, function, name)
        if on_trip not in ("raise", "reask"):
            raise ValueError(f"{owner}: on_trip must be 'raise' or 'reask', got {shown(on_trip)}")
        self.on_trip: OnTrip = on_trip
        self.is_async: bool = is_async_callable(function)

    def __repr__(self) -> str:
        return f"<OutputGuardrail {self.name!r} on_trip={self.on_trip!r}>"


G = TypeVar("G", InputGuardrail, OutputGuardrail)


def _made(owner: str, kind: Callable[..., G], function: object, **options: Any) -> G:
    # The factory's own name in its errors, not the class's.
    try:
        return kind(function, **options)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace(kind.__name__, owner, 1)) from None


@overload
def input_guardrail(
    function: GuardrailFunction, /, *, name: str | None = None, blocking: bool = False
) -> InputGuardrail: ...


@overload
def input_guardrail(
    function: None = None, /, *, name: str | None = None, blocking: bool = False
) -> Callable[[GuardrailFunction], InputGuardrail]: ...


def input_guardrail(
    function: GuardrailFunction | None = None,
    /,
    *,
    name: str | None = None,
    blocking: bool = False,
) -> InputGuardrail | Callable[[GuardrailFunction], InputGuardrail]:
    """A guardrail on a run's input, for ``Agent(input_guardrails=[...])``; also a decorator.

    ```python
    @input_guardrail
    async def no_homework(ctx: RunContext[None], messages: list[dict]) -> GuardrailResult:
        return GuardrailResult(tripwire="homework" in str(messages[-1]["content"]))
    ```

    *function* is called with the run's
    [RunContext][juno_bind_trio.agent.RunContext] and the messages the first
    model request sends (the history and the prompt; read them, do not change
    them). It runs beside that request: when it trips, the request is
    cancelled at once, no tool starts, and the run raises
    [GuardrailTripped][juno_bind_trio.GuardrailTripped]. The request's answer
    waits for every guardrail to pass. With *blocking* the request starts only
    after this guardrail passed (for a check whose trip must cost no tokens).
    A synchronous function runs in a worker thread. *name* defaults to the
    function's name.
    """
    make = functools.partial(_made, "input_guardrail", InputGuardrail, name=name, blocking=blocking)
    if function is None:
        return make
    return make(function)


@overload
def output_guardrail(
    function: GuardrailFunction, /, *, name: str | None = None, on_trip: OnTrip = "raise"
) -> OutputGuardrail: ...


@overload
def output_guardrail(
    function: None = None, /, *, name: str | None = None, on_trip: OnTrip = "raise"
) -> Callable[[GuardrailFunction], OutputGuardrail]: ...


def output_guardrail(
    function: GuardrailFunction | None = None,
    /,
    *,
    name: str | None = None,
    on_trip: OnTrip = "raise",
) -> OutputGuardrail | Callable[[GuardrailFunction], OutputGuardrail]:
    """A guardrail on a run's final output, for ``Agent(output_guardrails=[...])``; a decorator too.

    *function* is called with the run's
    [RunContext][juno_bind_trio.agent.RunContext] and the final output (the
    text, or the validated value of the agent's ``output_type``) before the
    run returns it. When it trips, a reader that saw the answer stream gets a
    reset withdrawing it (reason ``"guardrail"``) and the run raises
    [GuardrailTripped][juno_bind_trio.GuardrailTripped]; with
    ``on_trip="reask"`` the model is asked again instead, told the result's
    ``message`` (up to the agent's ``max_output_retries`` times a turn, each a
    request; then it raises). A synchronous function runs in a worker thread.
    """
    make = functools.partial(_made, "output_guardrail", OutputGuardrail, name=name, on_trip=on_trip)
    if function is None:
        return make
    return make(function)


def _checked_list(
    owner: str, what: str, given: object, kind: type[G], make: Callable[[Any], G]
) -> tuple[G, ...]:
    if given is None:
        return ()
    if isinstance(given, str | bytes) or not isinstance(given, Iterable):
        raise TypeError(f"{owner}: {what} must be a list of guardrails, got {shown(given)}")
    guards: list[G] = []
    for index, item in enumerate(given):
        if isinstance(item, InputGuardrail | OutputGuardrail) and not isinstance(item, kind):
            raise TypeError(
                f"{owner}: {what}[{index}] is an {type(item).__name__} ({item.name!r}); "
                f"{what} takes {kind.__name__}s"
            )
        if not isinstance(item, kind):
            if not callable(item):
                raise TypeError(
                    f"{owner}: {what}[{index}] must be a guardrail or a function of "
                    f"(ctx, input), got {shown(item)}"
                )
            item = make(item)
        if any(each.name == item.name for each in guards):
            raise ValueError(f"{owner}: two {what} are named {item.name!r}; name one (name=...)")
        guards.append(item)
    return tuple(guards)


def check_input_guardrails(owner: str, given: object) -> tuple[InputGuardrail, ...]:
    """``Agent(input_guardrails=...)``, each a guardrail (a plain function is made one)."""
    return _checked_list(owner, "input_guardrails", given, InputGuardrail, InputGuardrail)


def check_output_guardrails(owner: str, given: object) -> tuple[OutputGuardrail, ...]:
    """``Agent(output_guardrails=...)``, each a guardrail (a plain function is made one)."""
    return _checked_list(owner, "output_guardrails", given, OutputGuardrail, OutputGuardrail)


# --- running one -----------------------------------------------------------------------


def _judged(guard: InputGuardrail | OutputGuardrail, found: object) -> GuardrailResult:
    if not isinstance(found, GuardrailResult):
        kind = "input" if isinstance(guard, InputGuardrail) else "output"
        raise UsageError(
            f"the {kind} guardrail {guard.name!r} returned {shown(found)}; a guardrail "
            "returns GuardrailResult(tripwire=...)"
        )
    return found


async def _in_thread(
    guard: InputGuardrail | OutputGuardrail, ctx: RunContext[Any], value: object
) -> object:
    # Abandoned on a cancel: a check has no effect to wait for, and a run
    # another guardrail already ended must not wait for this one's thread.
    return await anyio.to_thread.run_sync(
        functools.partial(guard.function, ctx, value), abandon_on_cancel=True
    )


async def _verdict(
    guard: InputGuardrail | OutputGuardrail, ctx: RunContext[Any], value: object
) -> GuardrailResult:
    if guard.is_async:
        return _judged(guard, await guard.function(ctx, value))
    return _judged(guard, await _in_thread(guard, ctx, value))


def _withdraw(stream: TurnTextStream | None) -> None:
    # A reset armed now is flushed by the finish: the reader's view of the turn
    # is empty before the exception leaves (nothing armed: nothing was shown).
    if stream is not None and not stream.finished:
        stream.begin_attempt("guardrail")
        stream.finish("succeeded")


def _tripped(
    guard: InputGuardrail | OutputGuardrail, kind: str, verdict: GuardrailResult
) -> GuardrailTripped:
    _tracing.run_event(
        "juno.guardrail.tripped", {"juno.guardrail.name": guard.name, "juno.guardrail.kind": kind}
    )
    return GuardrailTripped(guard.name, kind, verdict.info, verdict.message)


@final
class _Watch:
    """The input guardrails of one first request, and the first ending among them and
    the request: a trip, or a failure. Each guardrail runs as ``check`` in a child task;
    the request stays in the run's own task."""

    __slots__ = ("blocking_left", "ctx", "failure", "gate", "messages", "tasks", "trip")

    def __init__(self, ctx: RunContext[Any], messages: list[dict[str, Any]], blocking: int) -> None:
        self.ctx = ctx
        self.messages = messages
        self.trip: tuple[InputGuardrail, GuardrailResult] | None = None
        self.failure: Exception | None = None
        self.blocking_left: int = blocking
        self.gate: anyio.Event | None = anyio.Event() if blocking else None
        self.tasks: TaskGroup | None = None  # the group, once it is open

    @property
    def clear(self) -> bool:
        return self.trip is None and self.failure is None

    def end(self) -> None:
        assert self.tasks is not None
        self.tasks.cancel_scope.cancel()

    async def check(self, guard: InputGuardrail) -> None:
        """*guard*'s verdict; a trip or a failure (the first one) cancels the group."""
        # One coroutine a guardrail: the function is awaited here, not through _verdict.
        try:
            if guard.is_async:
                found = await guard.function(self.ctx, self.messages)
            else:
                found = await _in_thread(guard, self.ctx, self.messages)
            verdict = _judged(guard, found)
        except Exception as exc:
            # Cut off by the scope (another guardrail tripped): that one speaks.
            if self.clear and not cancelled_now():
                self.failure = exc
                self.end()
            return
        if verdict.tripwire:
            if self.clear:
                self.trip = (guard, verdict)
                self.end()
        elif guard.blocking:
            self.blocking_left -= 1
            if self.blocking_left == 0 and self.gate is not None:
                self.gate.set()


@final
class _FirstRequest:
    """A run's model, its first request made beside the run's input guardrails.

    The request runs in the calling task, inside a task group whose only children
    are the guardrails: one task per guardrail is the whole cost of a guardrail
    that never trips (docs/explanation/performance.md, "Guardrails"). After the
    first request the run's model is the plain one again, so later turns pay
    nothing, not even this object's frame on each of their awaits.
    """

    __slots__ = ("_blocking", "_core", "_guards", "_model", "_pending")

    def __init__(
        self, model: ModelFn, core: _RunCore[Any], guards: tuple[InputGuardrail, ...]
    ) -> None:
        self._model = model
        self._core = core
        self._guards = guards
        self._blocking = sum(1 for guard in guards if guard.blocking)
        self._pending = True

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        model = self._model
        if not self._pending:  # a structured-output re-ask of the first turn, say
            return await model(turn)
        self._pending = False
        core = self._core
        if core.model is self:
            core.model = model
        # The guardrails read their own copy of what the request sends.
        watch = _Watch(_context(core, turn.iteration), list(turn.messages), self._blocking)
        answer: ModelTurnResult
        answered = False
        # The request's own failure when a cancel came with it (a client that turns
        # a cancellation into its own error): the cancel is what leaves, if pending.
        late: Exception | None = None
        try:
            # Trio's own nursery on Trio: half the cost of anyio's task group, on a
            # group every guarded run opens (docs/explanation/performance.md).
            async with open_task_group() as tasks:
                watch.tasks = tasks
                for guard in self._guards:
                    tasks.start_soon(watch.check, guard)
                if watch.gate is not None:
                    await watch.gate.wait()
                try:
                    answer = await model(turn)
                    answered = True
                except Exception as exc:
                    if watch.clear and not cancelled_now():
                        watch.failure = exc
                    else:
                        late = exc
                    watch.end()
        except BaseExceptionGroup as group:
            # A guardrail's BaseException (KeyboardInterrupt, say): as itself.
            rest = split_cancellations(group)[1]
            if rest is None:
                raise
            raise one_failure(rest) from None
        if watch.trip is not None:
            guard, verdict = watch.trip
            _withdraw(turn.text_stream)
            await checkpoint_if_cancelled()  # a hard cancel outranks the trip
            raise _tripped(guard, "input", verdict)
        if watch.failure is not None:
            raise watch.failure
        if not answered:
            await checkpoint_if_cancelled()
            assert late is not None
            raise late
        return answer


def _context(core: _RunCore[Any], iteration: int) -> RunContext[Any]:
    # The run's own context, at no tool call (empty call id and name).
    return RunContext(
        deps=core.deps,
        run_id=core.run_id,
        tool_call_id="",
        tool_name="",
        iteration=iteration,
        chain=core.chain,
        children=core.children,
    )


def guarded_first_request(model: ModelFn, core: _RunCore[Any]) -> ModelFn:
    """*model*, its first request made beside the run's input guardrails (see the module
    docstring); every later request goes straight to *model*. *model* itself when the
    run has no input guardrail."""
    guards = core.agent.input_guardrails  # the agent starting the run (or continuing it)
    if not guards:
        return model
    return _FirstRequest(model, core, guards)


# --- the final output -----------------------------------------------------------------

_REASK: Final = "Your answer was refused by the {name} check. Answer again, without that problem."


async def _first_output_trip(
    guards: Sequence[OutputGuardrail], ctx: RunContext[Any], value: object
) -> tuple[OutputGuardrail, GuardrailResult] | None:
    if len(guards) == 1:  # the common case: no task group
        verdict = await _verdict(guards[0], ctx, value)
        return (guards[0], verdict) if verdict.tripwire else None
    found: list[tuple[OutputGuardrail, GuardrailResult]] = []
    failures: list[Exception] = []

    async def check(guard: OutputGuardrail, scope: anyio.CancelScope) -> None:
        try:
            verdict = await _verdict(guard, ctx, value)
        except Exception as exc:
            if not found and not failures and not cancelled_now():
                failures.append(exc)
                scope.cancel()
            return
        if verdict.tripwire and not found and not failures:
            found.append((guard, verdict))
            scope.cancel()

    try:
        async with anyio.create_task_group() as tasks:
            for guard in guards:
                tasks.start_soon(check, guard, tasks.cancel_scope)
    except BaseExceptionGroup as group:
        rest = split_cancellations(group)[1]
        if rest is None:
            raise
        raise one_failure(rest) from None
    await checkpoint_if_cancelled()
    if failures:
        raise failures[0]
    return found[0] if found else None


async def checked_output(
    core: _RunCore[Any], turn: ModelTurn, result: ModelTurnResult
) -> ModelTurnResult:
    """*result*, once the output guardrails passed its final output; re-asked
    (``on_trip="reask"``) or withdrawn and raised (``GuardrailTripped``) when one trips."""
    guards = core.agent.output_guardrails  # the agent in charge's, as its output type
    text = core.agent.output.text  # the agent in charge's (a handoff's target's)
    retries = core.agent.max_output_retries
    asked = turn
    while True:
        answered: object = result
        if not isinstance(answered, ModelTurnResult) or core.reask_owed is not None:
            return result
        if text:
            value: Any = NO_VALUE if result.tool_calls else (result.content or "")
        else:
            value = core.output_value
        if value is NO_VALUE:
            return result  # a tool turn, or an answer the output type has not accepted
        trip = await _first_output_trip(guards, _context(core, turn.iteration), value)
        if trip is None:
            return result
        guard, verdict = trip
        meter = core.meter
        stream = turn.text_stream
        if (
            guard.on_trip == "raise"
            or retries <= 0
            or core.stop.cancel_called
            or (meter is not None and not meter.may_request())
        ):
            _withdraw(stream)
            raise _tripped(guard, "output", verdict)
        retries -= 1
        # A re-ask, as the structured-output one: the replaced answer's usage counts
        # now (the loop never sees it), and the re-ask is a request.
        core.extra.spend(result, meter)
        core.extra.requests += 1
        if meter is not None:
            meter.requests += 1
        _tracing.run_event("juno.guardrail.reask", {"juno.guardrail.name": guard.name})
        if stream is not None:
            stream.begin_attempt("guardrail")
        said = verdict.message or _REASK.format(name=guard.name)
        asked = asked.with_extra_messages(
            [{"role": "assistant", "content": result.content}, {"role": "user", "content": said}]
        )
        result = await answer_of(core, asked)


def tripped_result(core: _RunCore[Any]) -> AgentResult[Any]:
    """The result so far of a run a guardrail ended: no answer, every call answered."""
    loop = core.loop
    stats = RunStats() if loop is None else loop.stats
    messages = core.state.messages
    return AgentResult(
        output="" if core.agent.output.text else None,
        messages=messages,
        new_start=min(core.new_start, len(messages)),
        reason="stopped",
        stats=core.extra.added_to(stats),
        run_id=core.run_id,
        iterations=0 if loop is None else loop.iterations,
        agent_name=core.agent.name,  # who was speaking when it tripped
        handoffs=() if core.handover is None else core.handover.record(),
    )
