"""A stand-in for an Agent in the relay's tests: ``open_run`` plays a script of events.

Each step is an event to yield (after ``pace`` seconds of the virtual clock),
or ``("wait_stop",)``: the run waits there until ``stop()`` or ``cancel()``.
``stop()`` ends the script softly at the next step; ``cancel()`` cancels its scope.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs

from juno_bind_trio.completion import ResetEvent, TextEvent


@attrs.frozen
class Wire:
    data: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return dict(self.data)


def text(turn: str, epoch: int, seq: int, value: str) -> TextEvent:
    return TextEvent(turn_id=turn, epoch=epoch, seq=seq, text=value)


def reset(turn: str, epoch: int, seq: int) -> ResetEvent:
    return ResetEvent(turn_id=turn, epoch=epoch, seq=seq, reason="attempt_failed")


def turn_ended(turn: str, content: str | None, tool_calls: int = 0) -> Wire:
    return Wire(
        {
            "kind": "turn_ended",
            "iteration": 1,
            "turnId": turn,
            "content": content,
            "toolCalls": tool_calls,
        }
    )


def tool_started(call_id: str, name: str = "lookup") -> Wire:
    return Wire(
        {
            "kind": "tool_call_started",
            "iteration": 1,
            "toolCallId": call_id,
            "toolName": name,
            "arguments": "{}",
        }
    )


def tool_ended(call_id: str, status: str = "finished", name: str = "lookup") -> Wire:
    return Wire(
        {
            "kind": "tool_call_ended",
            "iteration": 1,
            "toolCallId": call_id,
            "toolName": name,
            "status": status,
            "failureKind": None,
            "content": "found",
        }
    )


WAIT_STOP = ("wait_stop",)


@attrs.define(eq=False)
class ScriptedRun:
    run_id: str
    steps: Sequence[object]
    pace: float
    messages: list[dict[str, Any]] = attrs.field(factory=list)
    stopped: bool = False
    cancelled: bool = False
    ignore_cancel: bool = False
    _wake: anyio.Event = attrs.field(factory=anyio.Event)

    def stop(self) -> None:
        self.stopped = True
        self._wake.set()

    def cancel(self) -> None:
        # No cancel scope inside the async generator below (it would misnest):
        # the generator checks the flag after every wait instead.
        if self.ignore_cancel:
            return
        self.cancelled = True
        self._wake.set()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        reason = "completed"
        for step in self.steps:
            if step == WAIT_STOP:
                await self._wake.wait()
            else:
                with anyio.move_on_after(self.pace):
                    await self._wake.wait()
            if self.cancelled:
                reason = "cancelled"
                break
            if self.stopped:
                reason = "stopped"
                break
            if step == WAIT_STOP:
                continue
            self.messages.append({"role": "event", "kind": step.to_wire()["kind"]})  # type: ignore[attr-defined]
            yield step
        yield Wire({"kind": "run_ended", "runId": self.run_id, "reason": reason})


@attrs.define(eq=False)
class ScriptedAgent:
    steps: Sequence[object]
    pace: float = 0.01
    runs: list[ScriptedRun] = attrs.field(factory=list)
    fail_with: Exception | None = None
    fail_on_enter: Exception | None = None
    ignore_cancel: bool = False

    @asynccontextmanager
    async def open_run(
        self, prompt: str, *, run_id: str | None = None
    ) -> AsyncIterator[ScriptedRun]:
        assert run_id is not None
        if self.fail_on_enter is not None:
            raise self.fail_on_enter
        run = ScriptedRun(run_id, self.steps, self.pace)
        run.ignore_cancel = self.ignore_cancel
        run.messages.append({"role": "user", "content": prompt})
        self.runs.append(run)
        yield run
        if self.fail_with is not None:
            raise self.fail_with
