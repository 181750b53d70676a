"""Input guardrails: beside the first model request, cancelling it when they trip."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import GuardrailTripped, UsageError
from juno_bind_trio.agent import (
    Agent,
    AgentRun,
    GuardrailResult,
    InputGuardrail,
    ResetEvent,
    RunContext,
    TextEvent,
    input_guardrail,
    output_guardrail,
    tool,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.testing import FunctionModel, StreamResponse, open_fake_openai_server
from module_files import load_file

store_helpers = load_file(
    "guardrail_store_helpers", Path(__file__).resolve().parents[1] / "store" / "store_helpers.py"
)

pytestmark = pytest.mark.anyio


async def _read(
    agent: Agent[Any, Any],
    prompt: str,
    events: list[object],
    runs: list[AgentRun[Any]] | None = None,
) -> None:
    """Read a run's events into *events* (its handle into *runs*); its error leaves at the
    block's end."""
    async with agent.open_run(prompt) as run:
        if runs is not None:
            runs.append(run)
        async for event in run:
            events.append(event)


started: list[str] = []


@tool
async def launch(name: str) -> str:
    """Launch something."""
    started.append(name)
    return f"launched {name}"


def _launch_call(call_id: str = "c1") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "launch", "arguments": json.dumps({"name": "x"})},
    }


def _streaming_model(pieces: int, read: list[float], *, calls: bool = True) -> FunctionModel:
    """Streams *pieces* one virtual second apart (each read logged at its time), then
    asks for a tool call; after the first turn, answers "done"."""

    async def fn(turn: ModelTurn) -> Any:
        if turn.iteration > 1:
            yield "done"
            return
        for index in range(pieces):
            await anyio.sleep(1)
            read.append(anyio.current_time())
            yield f"w{index} "
        if calls:
            yield ModelTurnResult(tool_calls=(_launch_call(),))

    return FunctionModel(fn)


def _trips_at(seconds: float, info: object = None) -> InputGuardrail:
    async def tripper(ctx: RunContext[None], messages: list[dict[str, Any]]) -> GuardrailResult:
        await anyio.sleep(seconds)
        return GuardrailResult(tripwire=True, info=info, message="not allowed")

    return input_guardrail(tripper, name="tripper")


def _passes_at(seconds: float, name: str = "slow", **options: Any) -> InputGuardrail:
    async def passer(ctx: RunContext[None], messages: list[dict[str, Any]]) -> GuardrailResult:
        await anyio.sleep(seconds)
        return GuardrailResult(tripwire=False)

    return input_guardrail(passer, name=name, **options)


# --- tripping during the stream ----------------------------------------------------------


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trip_at=st.integers(min_value=0, max_value=12).map(lambda n: n / 2))
def test_a_trip_at_any_moment_of_the_first_stream_reads_nothing_after_it(
    backend: str, trip_at: float
) -> None:
    """Tripping at any moment (before, during, after the six-second stream): no piece is
    read after the trip, no tool starts, and the run raises the trip bare."""

    async def main() -> None:
        started.clear()
        read: list[float] = []
        agent = Agent(
            _streaming_model(6, read), tools=[launch], input_guardrails=[_trips_at(trip_at, 7)]
        )
        with pytest.raises(GuardrailTripped) as caught:
            await agent.run("go")
        error = caught.value
        assert anyio.current_time() == trip_at
        assert all(at <= trip_at for at in read)
        # Every piece before the trip was read (one due at the trip's very moment may
        # go either way: the two tasks wake at the same virtual time).
        tie = 1 if trip_at.is_integer() and 0 < trip_at <= 6 else 0
        assert min(6, int(trip_at)) - tie <= len(read) <= min(6, int(trip_at))
        assert started == []
        assert (error.guardrail, error.kind, error.info, error.message) == (
            "tripper",
            "input",
            7,
            "not allowed",
        )
        result = error.result
        assert result is not None
        assert result.reason == "stopped"
        assert [m["role"] for m in result.messages] == ["user"]  # no answer committed
        assert result.stats.model_calls == 1
        assert result.stats.tool_calls == 0

    run_on(backend, main)


async def test_the_trip_cancels_the_sdk_request_through_the_fake_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real openai SDK: the trip cuts the streamed response off (the client hangs up
    at the trip), and no tool call of it runs."""
    started.clear()
    script = [
        StreamResponse.of_tool_calls(
            ("call_1", "launch", '{"name": "x"}'), text="let me launch it", chunk_delay=1.0
        ),
    ]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent = Agent("openai:juno-small", tools=[launch], input_guardrails=[_trips_at(2.5)])
        with pytest.raises(GuardrailTripped):
            await agent.run("launch x")
        assert anyio.current_time() == 2.5
        await agent.aclose()
        await anyio.sleep(2)  # the server's next write finds the client gone, if not before
    (request,) = server.requests
    assert request.client_gone_at is not None
    assert 2.5 <= request.client_gone_at <= 3.0
    assert request.events_sent == 3  # the events at 0, 1 and 2 seconds, no more
    assert request.completed_at is None
    assert started == []


async def test_the_reader_sees_the_streamed_text_withdrawn_before_the_trip_leaves() -> None:
    read: list[float] = []
    agent = Agent(
        _streaming_model(6, read, calls=False), input_guardrails=[_trips_at(3.5)], tools=[launch]
    )
    events: list[object] = []
    runs: list[AgentRun[Any]] = []
    with pytest.raises(GuardrailTripped) as caught:
        await _read(agent, "go", events, runs)
    (run,) = runs
    assert type(caught.value) is GuardrailTripped
    texts = [e.text for e in events if isinstance(e, TextEvent)]
    assert texts == ["w0 ", "w1 ", "w2 "]
    resets = [e for e in events if isinstance(e, ResetEvent)]
    assert [r.reason for r in resets] == ["guardrail"]
    assert events.index(resets[0]) > max(
        events.index(e) for e in events if isinstance(e, TextEvent)
    )
    assert run.text == ""
    assert run.result is None


def test_run_sync_raises_the_trip_bare() -> None:
    read: list[float] = []
    agent = Agent(_streaming_model(1, read), input_guardrails=[_trips_at(0)], tools=[launch])
    with pytest.raises(GuardrailTripped) as caught:
        agent.run_sync("go")
    assert caught.value.guardrail == "tripper"


# --- guardrails that pass ----------------------------------------------------------------


@pytest.mark.parametrize(("guard_seconds", "ends_at"), [(0.5, 6.0), (6.0, 6.0), (9.0, 9.0)])
async def test_a_passing_guardrail_runs_beside_the_request_and_delays_nothing_past_itself(
    guard_seconds: float, ends_at: float
) -> None:
    """Six seconds of stream and an answer: the run ends at the later of the two, not
    their sum (the guardrail runs beside the request)."""
    read: list[float] = []
    agent = Agent(
        _streaming_model(6, read, calls=False), input_guardrails=[_passes_at(guard_seconds)]
    )
    result = await agent.run("go")
    assert anyio.current_time() == ends_at
    assert result.output == "w0 w1 w2 w3 w4 w5 "
    assert result.stats.model_calls == 1


async def test_no_tool_starts_before_every_input_guardrail_passed() -> None:
    started.clear()
    times: list[float] = []

    @tool
    async def stamp(name: str) -> str:
        """Note the time."""
        times.append(anyio.current_time())
        return "ok"

    def fn(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "stamp", "arguments": '{"name": "x"}'},
        }
        return ModelTurnResult(tool_calls=(call,))

    agent = Agent(
        FunctionModel(fn), tools=[stamp], input_guardrails=[_passes_at(3), _passes_at(1, "quick")]
    )
    result = await agent.run("go")
    assert times == [3.0]
    assert result.output == "done"
    assert anyio.current_time() == 3.0


async def test_the_request_stays_in_the_runs_task_and_each_guardrail_runs_in_its_own() -> None:
    """The first request is made in the run's own task (no task of its own); each
    guardrail runs in one child task, once a run; the later turns start none."""
    run_task = anyio.get_current_task().id
    model_tasks: list[int] = []
    guard_tasks: dict[str, list[int]] = {"first": [], "second": []}

    async def fn(turn: ModelTurn) -> ModelTurnResult:
        model_tasks.append(anyio.get_current_task().id)
        await anyio.sleep(1)
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(tool_calls=(_launch_call(),))

    def noting(name: str) -> InputGuardrail:
        async def check(ctx: RunContext[None], messages: list[dict[str, Any]]) -> GuardrailResult:
            guard_tasks[name].append(anyio.get_current_task().id)
            await anyio.sleep(0.5)
            return GuardrailResult(tripwire=False)

        return input_guardrail(check, name=name)

    agent = Agent(fn, tools=[launch], input_guardrails=[noting("first"), noting("second")])
    for _ in range(2):  # a second run of the same agent: its own first request guarded
        model_tasks.clear()
        for tasks in guard_tasks.values():
            tasks.clear()
        assert (await agent.run("go")).output == "done"
        assert model_tasks == [run_task, run_task]
        (first,), (second,) = guard_tasks.values()
        assert len({run_task, first, second}) == 3


async def test_the_turns_after_the_first_call_the_model_with_no_guardrail_frame_above() -> None:
    """After the first request the run's model is the plain one again: no later turn
    awaits through the guardrails' wrapper."""
    from juno_bind_trio.agent import _guardrails as guardrails_module

    wrapped: list[bool] = []

    async def fn(turn: ModelTurn) -> ModelTurnResult:
        frame: FrameType | None = sys._getframe(1)
        files: list[str] = []
        while frame is not None:
            files.append(frame.f_code.co_filename)
            frame = frame.f_back
        wrapped.append(guardrails_module.__file__ in files)
        await anyio.sleep(1)
        if turn.iteration > 2:
            return ModelTurnResult(content="done")
        return ModelTurnResult(tool_calls=(_launch_call(f"c{turn.iteration}"),))

    agent = Agent(fn, tools=[launch], input_guardrails=[_passes_at(0.5)])
    assert (await agent.run("go")).output == "done"
    assert wrapped == [True, False, False]


async def test_a_blocking_guardrail_gates_the_request() -> None:
    asked_at: list[float] = []

    async def fn(turn: ModelTurn) -> ModelTurnResult:
        asked_at.append(anyio.current_time())
        await anyio.sleep(1)
        return ModelTurnResult(content="hi")

    agent = Agent(
        fn,
        input_guardrails=[_passes_at(2, "gate", blocking=True), _passes_at(2.5, "beside")],
    )
    assert (await agent.run("go")).output == "hi"
    assert asked_at == [2.0]
    assert anyio.current_time() == 3.0


async def test_a_blocking_guardrail_that_trips_makes_no_request() -> None:
    asked: list[int] = []

    async def fn(turn: ModelTurn) -> ModelTurnResult:
        asked.append(turn.iteration)
        return ModelTurnResult(content="hi")

    guard = _trips_at(1)
    agent = Agent(fn, input_guardrails=[input_guardrail(guard.function, blocking=True)])
    with pytest.raises(GuardrailTripped):
        await agent.run("go")
    assert asked == []


async def test_only_the_first_request_is_guarded_and_the_guardrail_sees_what_it_sends() -> None:
    seen: list[list[dict[str, Any]]] = []
    contexts: list[RunContext[Any]] = []

    def check(ctx: RunContext[Any], messages: list[dict[str, Any]]) -> GuardrailResult:
        # A synchronous guardrail: run in a worker thread.
        seen.append(messages)
        contexts.append(ctx)
        return GuardrailResult(tripwire=False)

    def fn(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(tool_calls=(_launch_call(),))

    agent = Agent(
        FunctionModel(fn), tools=[launch], instructions="Be kind.", input_guardrails=[check]
    )
    result = await agent.run("hello", deps=None, run_id="r1")
    assert result.output == "done"
    assert seen == [
        [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hello"}]
    ]
    assert contexts[0].run_id == "r1"
    assert contexts[0].iteration == 1


# --- failures --------------------------------------------------------------------------


async def test_a_guardrail_that_raises_fails_the_run_as_itself() -> None:
    async def broken(ctx: RunContext[None], messages: list[dict[str, Any]]) -> GuardrailResult:
        await anyio.sleep(1.5)
        raise ValueError("the classifier is down")

    read: list[float] = []
    agent = Agent(_streaming_model(6, read), tools=[launch], input_guardrails=[broken])
    with pytest.raises(ValueError, match="the classifier is down"):
        await agent.run("go")
    assert read == [1.0]  # the request was cancelled with the failure
    with pytest.raises(ValueError, match="the classifier is down"):
        await _read(agent, "go", [])


async def test_the_requests_own_failure_leaves_as_itself() -> None:
    async def fn(turn: ModelTurn) -> ModelTurnResult:
        await anyio.sleep(1)
        raise KeyError("model down")

    agent = Agent(fn, input_guardrails=[_passes_at(5)])
    with pytest.raises(KeyError, match="model down"):
        await agent.run("go")
    assert anyio.current_time() == 1.0  # the guardrails were cancelled with it


async def test_a_guardrail_returning_something_else_is_a_usage_error() -> None:
    async def sloppy(ctx: RunContext[None], messages: list[dict[str, Any]]) -> Any:
        return True

    agent = Agent(
        FunctionModel(lambda turn: ModelTurnResult(content="x")), input_guardrails=[sloppy]
    )
    with pytest.raises(UsageError, match="'sloppy' returned True"):
        await agent.run("go")


async def test_a_cancel_from_outside_leaves_as_a_cancel() -> None:
    read: list[float] = []
    agent = Agent(_streaming_model(6, read), tools=[launch], input_guardrails=[_passes_at(10)])
    with anyio.move_on_after(2.5) as scope:
        await agent.run("go")
    assert scope.cancelled_caught
    assert read == [1.0, 2.0]


async def test_a_cancel_from_outside_leaves_bare_not_in_a_group() -> None:
    # The guardrails' task group (Trio's own nursery on Trio) holds only
    # cancellations then: what leaves the run is the one cancellation itself.
    left: list[BaseException] = []
    agent = Agent(_streaming_model(6, []), input_guardrails=[_passes_at(10), _passes_at(9, "b")])
    with anyio.move_on_after(2.5) as scope:
        try:
            await agent.run("go")
        except BaseException as exc:
            left.append(exc)
            raise
    assert scope.cancelled_caught
    assert [type(exc) for exc in left] == [anyio.get_cancelled_exc_class()]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_tripped_run_is_recorded_in_its_store(tmp_path: Path, kind: str) -> None:
    """Real SQLite and PostgreSQL: the run ends "failed", the detail naming the trip,
    its lease given back, its transcript without the cut-off answer."""
    started.clear()
    read: list[float] = []
    if kind == "sqlite":
        store: RunStore = SqliteRunStore(tmp_path / "runs.db")
    else:
        store = PostgresRunStore(store_helpers.postgres_dsn())
    async with store:
        agent = Agent(
            _streaming_model(6, read), tools=[launch], store=store, input_guardrails=[_trips_at(0)]
        )
        with pytest.raises(GuardrailTripped):
            await agent.run("go", run_id="tripped")
        record = await store.get_run("tripped")
        stored = await store.load("tripped")
    assert record.status == "failed"
    assert record.detail is not None
    assert "GuardrailTripped" in record.detail
    assert record.lease_owner is None
    assert [m["role"] for m in stored.messages] == ["user"]
    assert started == []


# --- construction ------------------------------------------------------------------------


def test_guardrails_are_checked_when_the_agent_is_built() -> None:
    def model(turn: ModelTurn) -> Any:
        raise AssertionError

    fn = FunctionModel(model)

    def check(ctx: Any, messages: Any) -> GuardrailResult:
        return GuardrailResult(tripwire=False)

    with pytest.raises(TypeError, match=r"input_guardrails\[0\] must be a guardrail"):
        Agent(fn, input_guardrails=[42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"input_guardrails\[0\] is an OutputGuardrail"):
        Agent(fn, input_guardrails=[output_guardrail(check)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two input_guardrails are named 'check'"):
        Agent(fn, input_guardrails=[check, input_guardrail(check, blocking=True)])
    with pytest.raises(TypeError, match="input_guardrails must be a list"):
        Agent(fn, input_guardrails="check")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="blocking must be a bool"):
        input_guardrail(check, blocking=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="expected a function"):
        input_guardrail(3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="GuardrailResult: tripwire"):
        GuardrailResult(tripwire=1)  # type: ignore[arg-type]
    made = input_guardrail(name="named", blocking=True)(check)
    assert (made.name, made.blocking) == ("named", True)
    assert repr(made) == "<InputGuardrail 'named' blocking=True>"
