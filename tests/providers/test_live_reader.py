"""A live reader in the same process, through the real SDK against the fake server.

The documented reader (``open_memory_sink()``, a task looping over its events
into a ``TurnTextView``) under a burst as fast as loopback delivers it, with a
slow reader, across a fallback reset, and with a reader that dies mid-turn.
Every one ends with the view equal to the turn's text.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from juno_bind_trio.completion import (
    CoalescingReceiver,
    ListSink,
    ResetEvent,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
    open_memory_sink,
)
from juno_bind_trio.loop import LoopEvent, LoopState, TextSinkErrorsEvent, ToolLoop
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)

# A burst is paced by the SDK's parsing on the wall clock, whatever the clock: the
# default run takes each test on one backend (tests/conftest.py), nox on both.
pytestmark = [pytest.mark.anyio, pytest.mark.one_backend_by_default]

MESSAGES = [{"role": "user", "content": "hi"}]
# 0.8 MB of SSE, many socket reads: a burst. Its cost is the SDK's, per chunk; at
# 20,000 chunks these tests spent 25 s of the suite, and the reader saw the same two
# hand-offs it sees at 5,000 (the deltas of a burst all arrive in one virtual instant).
BURST = 5_000


def pieces(count: int, prefix: str = "") -> list[str]:
    return [f"{prefix}{i} " for i in range(count)]


class Reader:
    """Renders one turn's events into a view, recording every state it showed."""

    def __init__(self, turn_id: str, *, work: float = 0.0) -> None:
        self.view = TurnTextView(turn_id)
        self.work = work
        self.states: list[str] = []
        self.events = 0
        self.resets = 0

    async def run(self, events: CoalescingReceiver[TurnStreamEvent]) -> None:
        async for event in events:
            self.events += 1
            if isinstance(event, ResetEvent):
                self.resets += 1
            assert self.view.apply(event)
            self.states.append(self.view.text)
            if self.work:
                await anyio.sleep(self.work)  # its "work" per event, on the test's clock


async def routed_turn(script: Any, reader: Reader, plan: RoutePlan | None = None) -> str:
    """One routed turn over a fresh server, read live; returns the turn's content."""
    plan = plan or RoutePlan([RouteStage("m", [Candidate("p")])])
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="test") as client,
        anyio.create_task_group() as tg,
        open_memory_sink() as (sink, events),
    ):
        tg.start_soon(reader.run, events)
        providers = {c.provider for stage in plan.stages for c in stage.candidates}
        model = OpenAIChatModel(plan=plan, clients=dict.fromkeys(providers, client))
        stream = TurnTextStream(sink=sink, turn_id=reader.view.turn_id)
        result = await model.route(MESSAGES, text_stream=stream)
        stream.finish("succeeded" if result.ok else "failed")
        assert stream.sink_errors == 0
        content = result.unwrap().content or ""
        assert stream.text == content
    return content


async def test_a_5000_chunk_burst_reaches_the_reader_whole() -> None:
    reader = Reader("t1")
    content = await routed_turn([StreamResponse.of_text(*pieces(BURST))], reader)
    assert content == "".join(pieces(BURST))
    assert reader.view.text == content
    # Every state shown was one the turn passed through (a prefix, on one attempt).
    assert all(content.startswith(state) for state in reader.states)
    # Handed over per wake-up, not per delta.
    assert reader.events < BURST


async def test_a_slow_reader_ends_with_the_whole_text() -> None:
    reader = Reader("t1", work=0.001)
    content = await routed_turn([StreamResponse.of_text(*pieces(BURST))], reader)
    assert reader.view.text == content
    assert all(content.startswith(state) for state in reader.states)


async def test_a_reader_that_is_not_reading_holds_the_turn_up_not_at_all() -> None:
    """The turn runs to its end while the reader is stuck; memory stays one item."""
    async with (
        open_fake_openai_server([StreamResponse.of_text(*pieces(2000))]) as server,
        open_openai_client(base_url=server.base_url, api_key="test") as client,
    ):
        sink, events = open_memory_sink()
        stream = TurnTextStream(sink=sink, turn_id="t1")
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )
        result = await model.route(MESSAGES, text_stream=stream)
        stream.finish("succeeded")
        stats = sink.statistics()
        assert (stats.items_pending, stats.events_emitted) == (1, 2000)
        sink.close()
        view = TurnTextView("t1")
        async for event in events:
            view.apply(event)
        assert view.text == result.unwrap().content


async def test_a_burst_that_straddles_a_fallback_reset() -> None:
    first = pieces(BURST // 2, prefix="a")
    second = pieces(BURST // 2, prefix="b")
    script = [
        StreamResponse([*(TextDelta(p) for p in first), Disconnect()]),
        StreamResponse.of_text(*second),
    ]
    # Both candidates are the one fake server, which answers in script order.
    plan = RoutePlan([RouteStage("m", [Candidate("p"), Candidate("q")])])
    reader = Reader("t1")
    content = await routed_turn(script, reader, plan)
    assert content == "".join(second)
    assert reader.view.text == content
    dead = "".join(first)
    for state in reader.states:
        # Either attempt's text so far, never the two spliced.
        assert content.startswith(state) or dead.startswith(state)
    assert reader.resets <= 1
    if reader.resets == 0:
        # The reader never showed the dead attempt, so nothing was retracted.
        assert all(content.startswith(state) for state in reader.states)


async def test_a_reader_that_dies_mid_turn_is_reported_and_the_run_goes_on() -> None:
    loop_events: list[LoopEvent] = []
    send, receive = anyio.create_memory_object_stream[LoopEvent](100)
    seen = 0

    async def dies_after_first(events: CoalescingReceiver[TurnStreamEvent]) -> None:
        nonlocal seen
        async with events:
            async for _event in events:
                seen += 1
                break  # leaving the block closes the reader mid-turn

    async with (
        open_fake_openai_server(
            [StreamResponse.of_text(*pieces(1000), chunk_delay=0.001)]
        ) as server,
        open_openai_client(base_url=server.base_url, api_key="test") as client,
        anyio.create_task_group() as tg,
        open_memory_sink() as (sink, events),
    ):
        tg.start_soon(dies_after_first, events)
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )
        loop = ToolLoop(
            state=LoopState(messages=list(MESSAGES)),
            max_iterations=2,
            call_model=model,
            run_tool_call=_no_tools,
            text_sink=sink,
            events=send,
            run_id="run",
        )
        result = await loop.run()
    send.close()
    async with receive:
        loop_events.extend([event async for event in receive])
    assert seen == 1
    assert result.reason == "completed"
    assert result.content == "".join(pieces(1000))
    assert result.stats.text_sink_errors > 0
    reports = [e for e in loop_events if isinstance(e, TextSinkErrorsEvent)]
    assert reports == [
        TextSinkErrorsEvent(
            iteration=1,
            turn_id="run:1",
            sink_errors=result.stats.text_sink_errors,
            text=result.content,
        )
    ]
    # One call repairs a view from the report.
    view = TurnTextView("run:1")
    view.resync(reports[0].text)
    assert view.text == result.content


async def test_a_turn_whose_sink_never_fails_reports_nothing() -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](100)
    async with (
        open_fake_openai_server([StreamResponse.of_text("a", "b")]) as server,
        open_openai_client(base_url=server.base_url, api_key="test") as client,
    ):
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )
        loop = ToolLoop(
            state=LoopState(messages=list(MESSAGES)),
            max_iterations=1,
            call_model=model,
            run_tool_call=_no_tools,
            text_sink=ListSink(),
            events=send,
        )
        result = await loop.run()
    send.close()
    async with receive:
        kinds = [type(event).__name__ async for event in receive]
    assert result.stats.text_sink_errors == 0
    assert "TextSinkErrorsEvent" not in kinds


async def _no_tools(call: Any) -> Any:  # pragma: no cover - the model asks for none
    raise AssertionError(call)
