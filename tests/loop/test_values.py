"""Bad input is refused at the boundary, naming the function and the value."""

from __future__ import annotations

import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from loop_scripts import Host, call

from juno_bind_trio.loop import (
    LOOP_END_REASONS,
    Interrupt,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    ToolCallOutcome,
    ToolLoop,
)


async def _model(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="x")  # pragma: no cover - never called


async def _tool(tc: Any) -> ToolCallOutcome:
    raise AssertionError  # pragma: no cover - never called


def make(**overrides: Any) -> ToolLoop:
    params: dict[str, Any] = {
        "state": LoopState(),
        "max_iterations": 3,
        "call_model": _model,
        "run_tool_call": _tool,
    }
    params.update(overrides)
    return ToolLoop(**params)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"state": object()}, TypeError, r"ToolLoop: state must have a `messages` list"),
        ({"max_iterations": 0}, ValueError, r"max_iterations must be a positive integer, got 0"),
        ({"max_iterations": 2.0}, TypeError, r"max_iterations must be a positive integer, got 2.0"),
        ({"max_iterations": True}, TypeError, r"max_iterations must be a positive integer"),
        (
            {"call_model": "model"},
            TypeError,
            r"ToolLoop: call_model must be an async function, got 'model'",
        ),
        ({"call_model": None}, TypeError, r"ToolLoop: call_model must be an async function"),
        (
            {"run_tool_call": 1},
            TypeError,
            r"run_tool_call must be an async function or None, got 1",
        ),
        (
            {"save_session": 1},
            TypeError,
            r"ToolLoop: save_session must be an async function or None, got 1",
        ),
        (
            {"stop": object()},
            TypeError,
            r"stop must be None or have a bool `cancel_called`",
        ),
        (
            {"events": []},
            TypeError,
            r"events must be None or a memory object send stream",
        ),
        ({"interrupts": []}, TypeError, r"interrupts must be None or a memory object receive"),
        ({"text_sink": 3}, TypeError, r"ToolLoop: text_sink must be None, a TurnStreamSink"),
        ({"max_text_resets": -1}, ValueError, r"max_text_resets must be None or a non-negative"),
        ({"max_text_resets": "1"}, TypeError, r"max_text_resets must be None or a non-negative"),
        ({"run_id": ""}, ValueError, r"ToolLoop: run_id must be a non-empty string, got ''"),
        ({"per_tool_limit": 0}, ValueError, r"ToolLoop: per_tool_limit must be a positive integer"),
        ({"first_iteration": 0}, ValueError, r"first_iteration must be a positive integer, got 0"),
        ({"first_iteration": "2"}, TypeError, r"first_iteration must be a positive integer"),
        ({"first_iteration": True}, TypeError, r"first_iteration must be a positive integer"),
    ],
)
def test_tool_loop_refuses_bad_parameters(
    overrides: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        make(**overrides)


def test_a_host_state_object_serves() -> None:
    class RunState:
        def __init__(self) -> None:
            self.messages: list[dict[str, Any]] = []
            self.user = "u"

    make(state=RunState())
    assert repr(make(run_id="r")) == "<ToolLoop run_id='r' iteration=0/3 started=False>"
    assert make().run_id != make().run_id


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": 3}, r"ModelTurnResult: content must be a str or None, got 3"),
        ({"reasoning": b"x"}, r"ModelTurnResult: reasoning must be a str or None"),
        ({"input_tokens": -1}, r"ModelTurnResult: input_tokens must be a non-negative integer"),
        ({"output_tokens": 1.5}, r"output_tokens must be a non-negative integer, got 1.5"),
        ({"cost": math.nan}, r"ModelTurnResult: cost must be a finite non-negative number"),
        ({"time_to_first_token": -1}, r"time_to_first_token must be a finite non-negative"),
        (
            {"tool_calls": call("a")},
            r"ModelTurnResult: tool_calls must be a sequence of",
        ),
        (
            {"tool_calls": [{"id": "a"}]},
            r"ModelTurnResult: tool_calls\[0\]: ToolCall.of: expected a function tool call",
        ),
    ],
)
def test_model_turn_result_refuses_bad_fields(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ModelTurnResult(**kwargs)


def test_model_turn_result_refuses_empty_and_duplicate_ids() -> None:
    with pytest.raises(ValueError, match=r"ModelTurnResult: a tool call has an empty id"):
        ModelTurnResult(tool_calls=[call("")])
    with pytest.raises(ValueError, match=r"ModelTurnResult: duplicate tool call id 'a'"):
        ModelTurnResult(tool_calls=[call("a"), call("a", "other")])


def test_model_turn_result_fields() -> None:
    result = ModelTurnResult(tool_calls=None, input_tokens=100, output_tokens=20)
    assert result.tool_calls == ()
    assert result.context_tokens == 120


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"tool_message": "x"}, TypeError, r"ToolCallOutcome: tool_message must be a mapping"),
        (
            {"tool_message": {"role": "user", "tool_call_id": "a", "content": ""}},
            ValueError,
            r"tool_message must have role 'tool'",
        ),
        (
            {"tool_message": {"role": "tool", "tool_call_id": "", "content": ""}},
            ValueError,
            r"needs a non-empty str tool_call_id",
        ),
        (
            {"tool_message": {"role": "tool", "tool_call_id": "a", "content": 3}},
            TypeError,
            r"content must be a str or a list of parts",
        ),
    ],
)
def test_tool_call_outcome_refuses_bad_messages(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ToolCallOutcome(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"request_compaction": 1}, r"ToolCallOutcome: request_compaction must be a bool, got 1"),
        ({"suspend": "please"}, r"suspend must be a SuspendDirective or None, got 'please'"),
        ({"activated_plugin": ""}, r"activated_plugin must be a non-empty str or None"),
        ({"activated_skill": 3}, r"activated_skill must be a non-empty str or None, got 3"),
    ],
)
def test_tool_call_outcome_refuses_bad_requests(kwargs: dict[str, Any], message: str) -> None:
    error = ValueError if "" in kwargs.values() else TypeError  # an empty name: a wrong value
    with pytest.raises(error, match=message):
        ToolCallOutcome.from_content("a", "ok", **kwargs)


def test_interrupt_validation() -> None:
    with pytest.raises(TypeError, match=r"Interrupt: content must be a str, got None"):
        Interrupt(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Interrupt: user_id must be a str or None, got 1"):
        Interrupt("x", user_id=1)  # type: ignore[arg-type]


def test_loop_state_validation() -> None:
    with pytest.raises(TypeError, match=r"LoopState: messages must be a list, got \(\)"):
        LoopState(())  # type: ignore[arg-type]


def test_loop_end_reasons() -> None:
    assert (
        frozenset(["completed", "max_iterations", "stopped", "suspended", "should_stop"])
        == LOOP_END_REASONS
    )


@pytest.mark.anyio
async def test_report_progress_refuses_bad_counts() -> None:
    seen: list[ModelTurn] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(turn)
        await anyio.lowlevel.checkpoint()
        with pytest.raises(TypeError, match=r"report_progress: output_tokens must be a non-neg"):
            turn.report_progress(-1)
        with pytest.raises(TypeError, match=r"report_progress: tool_calls must be a non-negative"):
            turn.report_progress(1, tool_calls=True)
        return ModelTurnResult(content="x")

    host = Host([])
    await host.loop(call_model=model).run()
    assert len(seen) == 1
