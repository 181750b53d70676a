"""The loop and its text sink: each turn's sink errors reported, and a sink the loop owns.

Scripted models (no network): each turn observes the pieces it is given, in
one attempt or two, and answers with their text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from juno_bind_trio import UsageError
from juno_bind_trio.completion import (
    CoalescingReceiver,
    CoalescingSink,
    ListSink,
    ResetEvent,
    TurnStreamEvent,
    TurnTextView,
    open_memory_sink,
)
from juno_bind_trio.loop import (
    LoopEvent,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    TextSinkErrorsEvent,
    ToolCallOutcome,
    ToolLoop,
)

pytestmark = pytest.mark.anyio


class FlakySink:
    """A retractable sink whose emit raises for the events a predicate picks."""

    retractable = True

    def __init__(self, fail: Any) -> None:
        self.fail = fail
        self.events: list[TurnStreamEvent] = []
        self.closed = 0

    def emit(self, event: TurnStreamEvent) -> None:
        if self.fail(event):
            raise ConnectionResetError("socket closed")
        self.events.append(event)

    def close(self) -> None:
        self.closed += 1


def model(turns: Sequence[Sequence[Sequence[str]]], *, raise_on: int | None = None) -> Any:
    """Turn i streams attempts turns[i] (each a list of pieces); the last attempt is the answer.

    Every turn but the last asks for one tool call, so the run goes on.
    """

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        attempts = turns[turn.iteration - 1]
        stream = turn.text_stream
        assert stream is not None
        for pieces in attempts:
            stream.begin_attempt()
            for piece in pieces:
                stream.observe(piece)
                await anyio.sleep(0.01)
        if raise_on == turn.iteration:
            raise RuntimeError("provider gone")
        last = turn.iteration == len(turns)
        calls = (
            ()
            if last
            else (
                {
                    "id": f"c{turn.iteration}",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                },
            )
        )
        return ModelTurnResult(content="".join(attempts[-1]) or None, tool_calls=calls)

    return call_model


async def run_tool(call: Any) -> ToolCallOutcome:
    return ToolCallOutcome.from_content(call["id"], "ok")


def build(sink: Any, turns: Any, **options: Any) -> tuple[ToolLoop, Any]:
    send, receive = anyio.create_memory_object_stream[LoopEvent](100)
    loop = ToolLoop(
        state=LoopState(messages=[{"role": "user", "content": "hi"}]),
        max_iterations=len(turns),
        call_model=options.pop("call_model", None) or model(turns),
        run_tool_call=run_tool,
        text_sink=sink,
        events=send,
        run_id="run",
        **options,
    )
    return loop, (send, receive)


def reports(channel: Any) -> list[TextSinkErrorsEvent]:
    send, receive = channel
    send.close()
    found = []
    while True:
        try:
            event = receive.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
        if isinstance(event, TextSinkErrorsEvent):
            found.append(event)
    receive.close()
    return found


# --- sink errors, per turn ------------------------------------------------------------------


async def test_each_turns_sink_errors_are_reported_with_its_text() -> None:
    sink = FlakySink(fail=lambda e: e.turn_id == "run:2" and e.seq in (1, 2))
    turns = [[["a", "b"]], [["x", "y", "z"]], [["done"]]]
    loop, channel = build(sink, turns)
    result = await loop.run()
    assert result.reason == "completed"
    assert result.stats.text_sink_errors == 2
    assert loop.stats.text_sink_errors == 2
    assert reports(channel) == [
        TextSinkErrorsEvent(iteration=2, turn_id="run:2", sink_errors=2, text="xyz")
    ]


async def test_a_lost_reset_is_reported_and_the_text_repairs_the_view() -> None:
    sink = FlakySink(fail=lambda e: isinstance(e, ResetEvent))
    loop, channel = build(sink, [[["old"], ["new"]]])
    result = await loop.run()
    (report,) = reports(channel)
    assert (report.sink_errors, report.text) == (1, "new")
    view = TurnTextView("run:1")
    for event in sink.events:
        view.apply(event)
    assert view.text == "old"  # stranded: the reset never arrived
    view.resync(report.text)
    assert view.text == "new" == result.content


async def test_a_failed_turns_sink_errors_are_counted_before_it_raises() -> None:
    sink = FlakySink(fail=lambda e: True)
    loop, channel = build(
        sink, [[["par", "tial"]]], call_model=model([[["par", "tial"]]], raise_on=1)
    )
    with pytest.raises(RuntimeError, match="provider gone"):
        await loop.run()
    assert loop.stats.text_sink_errors == 2
    assert reports(channel) == [
        TextSinkErrorsEvent(iteration=1, turn_id="run:1", sink_errors=2, text="partial")
    ]


async def test_no_errors_no_report() -> None:
    loop, channel = build(ListSink(), [[["a"]], [["b"]]])
    result = await loop.run()
    assert result.stats.text_sink_errors == 0
    assert reports(channel) == []


# --- a sink the loop owns ---------------------------------------------------------------------


async def test_an_owned_sink_ends_the_reader_with_the_run() -> None:
    sink, events = open_memory_sink()
    views: dict[str, TurnTextView] = {}

    async def render(events: CoalescingReceiver[TurnStreamEvent]) -> None:
        async for event in events:
            views.setdefault(event.turn_id, TurnTextView(event.turn_id)).apply(event)

    turns = [[["Hel", "lo"]], [["par"], ["wor", "ld"]]]
    # A reader left waiting would hang the task group: fail instead.
    with anyio.fail_after(60):
        await _run_with_reader(render, events, sink, turns, views)
    assert sink.statistics().sink_closed


async def _run_with_reader(
    render: Any, events: Any, sink: Any, turns: Any, views: dict[str, TurnTextView]
) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(render, events)
        loop, channel = build(sink, turns, owns_text_sink=True)
        result = await loop.run()
        # No close here: the loop closed the sink, so render() returns.
    reports(channel)
    assert result.reason == "completed"
    assert {turn: view.text for turn, view in views.items()} == {
        "run:1": "Hello",
        "run:2": "world",
    }


@pytest.mark.parametrize("how", ["raises", "cancelled"])
async def test_an_owned_sink_is_closed_however_the_run_ends(how: str) -> None:
    sink: CoalescingSink[TurnStreamEvent] = CoalescingSink()
    turns = [[["a", "b", "c"]]]
    loop, channel = build(
        sink,
        turns,
        owns_text_sink=True,
        call_model=model(turns, raise_on=1 if how == "raises" else None),
    )
    if how == "raises":
        with pytest.raises(RuntimeError):
            await loop.run()
    else:
        with anyio.move_on_after(0.015):
            await loop.run()
    reports(channel)
    assert sink.statistics().sink_closed
    taken = [event async for event in sink.receiver]
    view = TurnTextView("run:1")
    for event in taken:
        view.apply(event)
    assert view.text == ("abc" if how == "raises" else "ab")


async def test_a_sink_the_loop_does_not_own_stays_open() -> None:
    sink = FlakySink(fail=lambda e: False)
    loop, channel = build(sink, [[["a"]]])
    await loop.run()
    reports(channel)
    assert sink.closed == 0


async def test_an_owned_factory_closes_each_turns_sink_after_its_turn() -> None:
    made: dict[str, FlakySink] = {}
    closed_when: list[tuple[str, int]] = []

    def factory(turn_id: str) -> FlakySink:
        sink = made[turn_id] = FlakySink(fail=lambda e: False)
        original = sink.close

        def close() -> None:
            closed_when.append((turn_id, len(made)))
            original()

        sink.close = close  # type: ignore[method-assign]
        return sink

    loop, channel = build(factory, [[["a"]], [["b"]]], owns_text_sink=True)
    await loop.run()
    reports(channel)
    # Turn 1's sink closed before turn 2's was made.
    assert closed_when == [("run:1", 1), ("run:2", 2)]


async def test_an_owned_factory_sink_without_close_is_a_usage_error() -> None:
    loop, channel = build(lambda _turn_id: ListSink(), [[["a"]]], owns_text_sink=True)
    with pytest.raises(UsageError, match=r"owns_text_sink=True, but the text_sink factory made"):
        await loop.run()
    reports(channel)


def test_owning_a_sink_is_checked_at_construction() -> None:
    common: dict[str, Any] = {
        "state": LoopState(),
        "max_iterations": 1,
        "call_model": model([]),
        "run_tool_call": run_tool,
    }
    with pytest.raises(TypeError, match=r"ToolLoop: owns_text_sink must be a bool, got 1"):
        ToolLoop(**common, text_sink=ListSink(), owns_text_sink=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"owns_text_sink=True needs a text_sink to own"):
        ToolLoop(**common, owns_text_sink=True)
    with pytest.raises(TypeError, match=r"owns_text_sink=True, but the text_sink has no close"):
        ToolLoop(**common, text_sink=ListSink(), owns_text_sink=True)


# --- a close() that raises on the way out of a cancel -----------------------------------------


class CloseFailsSink(FlakySink):
    """A sink whose close() raises (the host's socket is gone) once *fail_close* says so."""

    def __init__(self, fail_close: bool = True) -> None:
        super().__init__(fail=lambda e: False)
        self.fail_close = fail_close

    def close(self) -> None:
        super().close()
        if self.fail_close:
            raise OSError("sink socket gone")


@pytest.mark.parametrize(
    ("owner", "where"), [("sink", "streaming"), ("sink", "tool"), ("factory", "streaming")]
)
async def test_a_close_that_raises_during_a_cancel_does_not_replace_it(
    owner: str, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Turn 1 streams "ab" and asks for c1; turn 2 streams "cde". The scope is
    # cancelled while turn 2 streams, or while c1 runs.
    turns = [[["a", "b"]], [["c", "d", "e"]]]
    made: list[CloseFailsSink] = []

    def factory(_turn_id: str) -> CloseFailsSink:
        # Only the sink of the turn the cancel cuts off fails to close: a turn
        # that ends well closes its sink outside any exception, and that close
        # error would be the run's own.
        made.append(CloseFailsSink(fail_close=len(made) == 1))
        return made[-1]

    if owner == "sink":
        made.append(CloseFailsSink())
    text_sink: Any = made[0] if owner == "sink" else factory

    async def run_tool_call(call: Any) -> ToolCallOutcome:
        if where == "tool":
            await anyio.sleep(1)
        return ToolCallOutcome.from_content(call["id"], "ok")

    state = LoopState(messages=[{"role": "user", "content": "hi"}])
    loop = ToolLoop(
        state=state,
        max_iterations=2,
        call_model=model(turns),
        run_tool_call=run_tool_call,
        text_sink=text_sink,
        owns_text_sink=True,
        run_id="run",
    )
    returned = False
    with caplog.at_level("ERROR", logger="juno_bind_trio"):
        with anyio.move_on_after(0.025 if where == "streaming" else 0.5) as scope:
            await loop.run()
            returned = True
    assert not returned
    assert scope.cancelled_caught  # the cancel reached its scope: not the close error
    assert made[-1].closed == 1
    # The close error is logged, with itself as the record's exception.
    [record] = caplog.records
    assert "close() raised" in record.getMessage()
    assert record.exc_info is not None
    assert repr(record.exc_info[1]) == "OSError('sink socket gone')"
    # The transcript is whole: c1 answered once, truthfully.
    answer = "ok" if where == "streaming" else None
    assert [m["role"] for m in state.messages] == ["user", "assistant", "tool"]
    assert [c["id"] for c in state.messages[1]["tool_calls"]] == ["c1"]
    tool = state.messages[2]
    assert tool["tool_call_id"] == "c1"
    if answer is not None:
        assert tool["content"] == answer
    else:
        assert '"interrupted"' in tool["content"]


@pytest.mark.parametrize("how", ["raises", "completes"])
async def test_a_close_error_propagates_only_when_nothing_else_is_leaving(how: str) -> None:
    sink = CloseFailsSink()
    turns = [[["a"]]]
    loop, channel = build(
        sink,
        turns,
        owns_text_sink=True,
        call_model=model(turns, raise_on=1 if how == "raises" else None),
    )
    # The turn's own error is what the host must see; with nothing else
    # leaving, the close error is the run's, as any port's would be.
    with pytest.raises(RuntimeError if how == "raises" else OSError):
        await loop.run()
    reports(channel)
    assert sink.closed == 1


async def test_a_turn_sink_whose_close_raises_still_has_its_errors_reported() -> None:
    # A factory's sink drops the turn's second delta and then fails to close
    # after a successful turn: the close error is the run's, but the host
    # still hears which turn's reader is out of step, with the text to resync.
    class DropsThenCloseFails(CloseFailsSink):
        def emit(self, event: TurnStreamEvent) -> None:
            if event.seq == 1:
                raise ConnectionResetError("socket closed")
            super().emit(event)

    made: list[DropsThenCloseFails] = []

    def factory(_turn_id: str) -> DropsThenCloseFails:
        made.append(DropsThenCloseFails())
        return made[-1]

    loop, channel = build(factory, [[["a", "b", "c"]]], owns_text_sink=True)
    with pytest.raises(OSError, match="sink socket gone"):
        await loop.run()
    [report] = reports(channel)
    assert (report.turn_id, report.sink_errors, report.text) == ("run:1", 1, "abc")
    assert [sink.closed for sink in made] == [1]
