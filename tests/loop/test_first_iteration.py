"""ToolLoop(first_iteration=k): the loop carries the run's own count, with no offset anywhere."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
from loop_scripts import Host, Turn, call

from juno_bind_trio.completion import ListSink, TurnStreamSink
from juno_bind_trio.loop import (
    AssistantMessageEvent,
    LoopEvent,
    OutputProgressEvent,
    StatusEvent,
    ThinkingEvent,
    ToolCallRejectedEvent,
)

pytestmark = pytest.mark.anyio


def drain(receive: Any) -> list[Any]:
    out = []
    while True:
        try:
            out.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return out


def turns() -> list[Turn]:
    return [
        Turn(content="looking", reasoning="hmm", calls=[call("a"), call("b", fail="boom")]),
        Turn(content="again", calls=[call("c")]),
        Turn(content="done"),
    ]


async def test_turns_events_and_turn_ids_carry_the_runs_iteration() -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    made: list[str] = []

    def factory(turn_id: str) -> TurnStreamSink:
        made.append(turn_id)
        return ListSink()

    host = Host(turns())
    loop = host.loop(first_iteration=7, events=send, text_sink=factory)
    assert loop.first_iteration == 7
    result = await loop.run()
    assert result.reason == "completed"
    # The loop's own count of model calls is unchanged by where the run stands.
    assert result.iterations == 3
    assert loop.iterations == 3
    assert loop.statistics().iterations == 3
    assert [t.iteration for t in host.model.seen] == [7, 8, 9]
    assert [t.turn_id for t in host.model.seen] == ["run:7", "run:8", "run:9"]
    assert made == ["run:7", "run:8", "run:9"]
    send.close()
    events = drain(receive)
    receive.close()
    iterations = {
        type(e).__name__: sorted({x.iteration for x in events if type(x) is type(e)})
        for e in events
    }
    assert iterations[StatusEvent.__name__] == [7, 8, 9]
    assert iterations[AssistantMessageEvent.__name__] == [7, 8, 9]
    assert iterations[OutputProgressEvent.__name__] == [7, 8, 9]
    assert iterations[ThinkingEvent.__name__] == [7]
    rejected = [e for e in events if isinstance(e, ToolCallRejectedEvent)]
    assert [(e.iteration, e.tool_call_id) for e in rejected] == [(7, "b")]


async def test_max_iterations_counts_this_loops_model_calls() -> None:
    host = Host([Turn(content="x", calls=[call(f"c{i}")]) for i in range(5)])
    result = await host.loop(first_iteration=40, max_iterations=2).run()
    assert result.reason == "max_iterations"
    assert result.iterations == 2
    assert [t.iteration for t in host.model.seen] == [40, 41]
    assert host.saves() == 2


async def test_the_default_starts_a_new_run_at_one() -> None:
    host = Host([Turn(content="done")])
    loop = host.loop()
    assert loop.first_iteration == 1
    await loop.run()
    assert [(t.iteration, t.turn_id) for t in host.model.seen] == [(1, "run:1")]
