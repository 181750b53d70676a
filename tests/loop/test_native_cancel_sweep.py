"""A run cancelled at every step it takes: the cancellation always gets out, every call answered.

On asyncio the cancel is a bare ``task.cancel()`` of the task running the run
(what a host does, and what ``asyncio.Runner`` does on Ctrl-C); on trio the
run's scope is cancelled. Each scenario runs once per step *k* and is
cancelled just before its *k*-th step (see ``tests/native_cancel.py``), on
virtual clocks, so every point where the run can be stopped is visited, in
the same order every time.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest
from loop_scripts import Host, Log, Turn, answers, assert_nothing_after_cancel, call, kind_of

from juno_bind_trio.completion import TurnTextView, open_memory_sink
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome
from juno_bind_trio.routing import (
    AttemptFailure,
    AttemptSuccess,
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteStage,
    execute_route_plan,
)
from juno_bind_trio.run import ToolCallLike, tool_call_arguments, tool_call_id
from native_cancel import Run, assert_always_cancelled, sweep


def check_loop_transcript(state: LoopState, log: Log) -> None:
    """Every call of every assistant message is answered, truthfully, and nothing ran late."""
    found = answers(state.messages)
    started = set(log.started())
    ended = {e[1] for e in log.entries if e[0] == "end"}
    for call_id, answer in found.items():
        kind = kind_of(answer)
        if call_id not in started:
            assert kind == "not_run", (call_id, answer)
        elif call_id not in ended:
            assert kind == "interrupted", (call_id, answer)


# --- a tool loop: a pooled batch, a serial call, a live reader on the text ------------------


async def nested_tool(tc: ToolCallLike) -> ToolCallOutcome:
    """A tool with its own task group whose parts use deadlines of their own.

    The shape that makes anyio, on asyncio, lose count of the host task's
    cancellation requests: a scope in a child task that was cancelled by its
    own deadline, left while the task group is being cancelled.
    """
    args: dict[str, Any] = json.loads(tool_call_arguments(tc))

    async def part(seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await anyio.sleep(seconds * 2)
        await anyio.sleep(0.25)

    async with anyio.create_task_group() as tg:
        for seconds in args.get("parts", (0.5, 1.0)):
            tg.start_soon(part, seconds)
    return ToolCallOutcome.from_content(tool_call_id(tc), json.dumps({"ok": tool_call_id(tc)}))


@attrs.define
class LoopScenario:
    """A three-turn run: a batch of four calls, a serial call, then the answer, read live."""

    serial_tool: bool = False
    host: Host | None = None
    rendered: list[str] = attrs.field(factory=list)

    async def __call__(self) -> None:
        turns = [
            Turn(
                calls=[
                    call("a", delay=1),
                    call("b", delay=2),
                    call("c", name="other", delay=1),
                    call("d", name="nested", parts=[0.5, 1.5]),
                    # Finishes under its shield whatever the cancel says.
                    call("e", name="shielded", shield=True, delay=1.5),
                ],
                deltas=["Let me ", "check."],
                failed_attempts=1,
                lost=["Hmm"],
            ),
            Turn(calls=[call("s", name="serial", delay=1)], deltas=["One more."]),
            Turn(content="done", deltas=["All ", "done."]),
        ]
        self.host = host = Host(turns)
        self.rendered = []

        async def tools(tc: ToolCallLike) -> ToolCallOutcome:
            if tool_call_id(tc) == "d" or self.serial_tool:
                host.log.note("start", tool_call_id(tc), anyio.current_time())
                result = await nested_tool(tc)
                host.log.note("end", tool_call_id(tc), anyio.current_time(), "returns")
                return result
            return await host.tools(tc)

        sink, receive = open_memory_sink()
        views: dict[str, TurnTextView] = {}

        async def render() -> None:
            async with receive:
                async for event in receive:
                    view = views.setdefault(event.turn_id, TurnTextView(event.turn_id))
                    view.apply(event)
            self.rendered.extend(v.text for v in views.values())

        async with anyio.create_task_group() as tg:
            tg.start_soon(render)
            loop = host.loop(
                run_tool_call=tools,
                text_sink=sink,
                runs_serially=lambda tc: tool_call_id(tc) == "s",
            )
            await loop.run()
            sink.close()

    def note_cancel(self) -> None:
        if self.host is not None:
            self.host.log.note("cancel", anyio.current_time())

    def check(self, run: Run) -> None:
        assert self.host is not None
        check_loop_transcript(self.host.state, self.host.log)
        # On trio the cancel has a moment (noted in the log): nothing starts after it.
        assert_nothing_after_cancel(self.host.log)


@pytest.mark.parametrize("serial_tool", [False, True], ids=["pooled", "nested-serial"])
def test_a_tool_loop_cancelled_at_every_step_always_ends_cancelled(
    backend: str, serial_tool: bool
) -> None:
    scenario = LoopScenario(serial_tool=serial_tool)
    runs = sweep(backend, scenario, scenario.check, on_trio_cancel=scenario.note_cancel)
    assert_always_cancelled(runs)


# --- a routed, streamed turn: the first provider dies mid-text, the next one answers ------------


class Broken(Exception):
    """The transport failed."""


async def connect() -> None:
    """Race two connection attempts the way anyio's ``connect_tcp`` does.

    The first to connect cancels the race's task group, so its cancel scope
    cancels *this* task while it waits for the loser: a cancel scope's own
    cancellation of the task, which a ``task.cancel()`` landing in the same
    step is folded into.
    """
    async with anyio.create_task_group() as race:

        async def attempt(delay: float) -> None:
            await anyio.sleep(delay)
            race.cancel_scope.cancel()

        race.start_soon(attempt, 0.01)
        race.start_soon(attempt, 0.02)


@attrs.define
class RoutedModel:
    """``call_model`` through the route executor, streaming into the turn's text stream."""

    log: Log

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        stream = turn.text_stream
        plan = RoutePlan(
            [
                RouteStage("large", [Candidate("first"), Candidate("second")]),
                RouteStage("small", [Candidate("first")]),
            ]
        )

        async def attempt(
            candidate: Candidate, cursor: RouteCursor
        ) -> AttemptSuccess[ModelTurnResult] | AttemptFailure:
            if stream is not None:
                stream.begin_attempt()
            self.log.note("attempt", candidate.provider, cursor.model)
            await connect()
            try:
                async with anyio.create_task_group() as tg:
                    # A watchdog beside the stream, as the real adapter has.
                    watchdog = anyio.CancelScope()

                    async def watch() -> None:
                        with watchdog, anyio.move_on_after(30):
                            await anyio.sleep_forever()

                    tg.start_soon(watch)
                    for word in ("Working ", "on ", "it "):
                        await anyio.sleep(0.1)
                        if stream is not None:
                            stream.observe(word)
                    watchdog.cancel()
                if candidate.provider == "first" and cursor.model == "large":
                    raise Broken("connection reset mid-stream")
                if candidate.provider == "second" and cursor.candidate_attempt == 1:
                    raise Broken("429: slow down")
            except Broken as exc:
                if "429" in str(exc):
                    # Retried on the same endpoint after the server's back-off.
                    verdict = ClassifiedError(RouteAction.RETRY_SAME_ENDPOINT, exc, retry_after=0.5)
                else:
                    verdict = ClassifiedError(RouteAction.NEXT_CANDIDATE, exc)
                return AttemptFailure(verdict, produced_output=False)
            calls = [call("r1", delay=1), call("r2", delay=1)] if turn.iteration == 1 else []
            return AttemptSuccess(
                ModelTurnResult(content=None if calls else "answered", tool_calls=calls)
            )

        result = await execute_route_plan(plan, attempt)
        return result.unwrap()


@attrs.define
class RoutedScenario:
    host: Host | None = None

    async def __call__(self) -> None:
        self.host = host = Host([])
        model = RoutedModel(host.log)
        sink, receive = open_memory_sink()

        async def render() -> None:
            # The reader keeps a helper task of its own, as a UI might (a cursor
            # blink): when the run's task group is cancelled, the helper's task
            # group is too, which is what makes anyio miscount (see connect()).
            async with receive, anyio.create_task_group() as helpers:
                helpers.start_soon(anyio.sleep_forever)
                async for _ in receive:
                    await anyio.lowlevel.checkpoint()
                helpers.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(render)
            await host.loop(call_model=model, text_sink=sink).run()
            sink.close()

    def check(self, run: Run) -> None:
        assert self.host is not None
        check_loop_transcript(self.host.state, self.host.log)


def test_a_routed_streamed_turn_cancelled_at_every_step_always_ends_cancelled(
    backend: str,
) -> None:
    scenario = RoutedScenario()
    runs = sweep(backend, scenario, scenario.check)
    assert_always_cancelled(runs)
