"""A tool's failure reaches the developer too: the log, with its traceback, and the ended event."""

from __future__ import annotations

import logging

import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio.agent import Agent, AgentEvent, ToolCallEndedEvent, tool

pytestmark = pytest.mark.anyio


@tool
async def divide(a: int, b: int) -> float:
    return a / b


def agent(*calls: dict[str, object]) -> Agent[None, str]:
    return Agent(ScriptedModel([Say(calls=list(calls)), Say(text="done")]), tools=[divide])


async def test_a_failed_call_is_logged_at_warning_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="juno_bind_trio")
    result = await agent(call("c1", "divide", a=1, b=0)).run("go", run_id="r1")
    assert tool_answers(result.messages)["c1"]["error"] == "ZeroDivisionError: division by zero"
    failures = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failures) == 1
    record = failures[0]
    assert record.name == "juno_bind_trio"
    message = record.getMessage()
    assert "r1" in message
    assert "divide" in message
    assert "c1" in message
    assert record.exc_info is not None
    assert record.exc_info[0] is ZeroDivisionError
    # Content stays opt-in: the arguments are not in the line.
    assert '"b": 0' not in message


async def test_the_arguments_are_logged_only_with_content_capture_on(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    caplog.set_level(logging.WARNING, logger="juno_bind_trio")
    await agent(call("c1", "divide", a=1, b=0)).run("go")
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert '"b": 0' in record.getMessage()


async def test_a_call_that_finished_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="juno_bind_trio")
    await agent(call("c1", "divide", a=4, b=2)).run("go")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_ended_event_carries_the_exception() -> None:
    events: list[AgentEvent] = []
    async with agent(call("c1", "divide", a=1, b=0), call("c2", "divide", a=4, b=2)).open_run(
        "go"
    ) as run:
        async for event in run:
            events.append(event)
    ended = {e.tool_call_id: e for e in events if isinstance(e, ToolCallEndedEvent)}
    assert isinstance(ended["c1"].error, ZeroDivisionError)
    assert ended["c2"].error is None
    # The exception is for the developer, never on the wire.
    assert "error" not in ended["c1"].to_wire()
