"""The sinks that ship: a list, the same-process coalescing channel, and a memory stream."""

from __future__ import annotations

import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juno_bind_trio.completion import (
    CoalescingReceiver,
    CoalescingSink,
    ListSink,
    MemorySinkPair,
    MemoryStreamSink,
    ResetEvent,
    TextEvent,
    TurnStreamEvent,
    TurnStreamSink,
    TurnTextStream,
    TurnTextView,
    open_memory_sink,
)

pytestmark = pytest.mark.anyio


def text(epoch: int, seq: int, value: str, turn: str = "t1") -> TextEvent:
    return TextEvent(turn_id=turn, epoch=epoch, seq=seq, text=value)


def reset(epoch: int, seq: int, turn: str = "t1") -> ResetEvent:
    return ResetEvent(turn_id=turn, epoch=epoch, seq=seq, reason="attempt_failed")


def drain(events: CoalescingReceiver[Any]) -> list[Any]:
    taken = []
    while True:
        try:
            taken.append(events.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return taken


# --- the coalescing channel: what the reader is handed ----------------------------------


def test_text_waiting_for_the_reader_merges_into_one_event() -> None:
    sink, events = open_memory_sink()
    for seq, piece in enumerate(["Hel", "lo", ", ", "world"]):
        sink.emit(text(0, seq + 10, piece))
    assert sink.statistics().items_pending == 1
    assert drain(events) == [text(0, 0, "Hello, world")]
    stats = sink.statistics()
    assert (stats.events_emitted, stats.events_merged, stats.items_delivered) == (4, 3, 1)


def test_reader_seq_is_gap_free_per_turn_whatever_the_stream_numbered() -> None:
    sink, events = open_memory_sink()
    sink.emit(text(0, 5, "a", turn="t1"))
    sink.emit(text(0, 0, "x", turn="t2"))
    assert drain(events) == [text(0, 0, "a", "t1"), text(0, 0, "x", "t2")]
    sink.emit(text(0, 9, "b", turn="t1"))
    sink.emit(text(0, 10, "c", turn="t1"))
    assert drain(events) == [text(0, 1, "bc", "t1")]


def test_only_adjacent_text_of_one_turn_and_epoch_merges() -> None:
    sink: CoalescingSink[Any] = CoalescingSink(retractable=False)
    events = sink.receiver
    sink.emit(text(0, 0, "a"))
    sink.emit(text(1, 1, "b"))  # a permanent surface's next attempt: no reset, no merge
    sink.send_nowait("tool call started")
    sink.emit(text(1, 2, "c"))  # after another item: a new run
    sink.emit(text(0, 0, "z", turn="t2"))
    assert drain(events) == [
        text(0, 0, "a"),
        text(1, 1, "b"),
        "tool call started",
        text(1, 2, "c"),
        text(0, 0, "z", "t2"),
    ]


def test_a_reset_drops_the_wiped_epochs_waiting_text_but_not_other_items() -> None:
    sink, events = open_memory_sink()
    sink.emit(text(0, 0, "shown"))
    assert drain(events) == [text(0, 0, "shown")]
    sink.emit(text(0, 1, " never shown"))
    sink.send_nowait(text(0, 0, "other turn", turn="t2"))
    sink.emit(reset(1, 2))
    sink.emit(text(1, 3, "retry"))
    assert drain(events) == [
        text(0, 0, "other turn", "t2"),
        reset(1, 1),
        text(1, 2, "retry"),
    ]
    assert sink.statistics().events_dropped == 1


def test_a_reset_for_a_turn_the_reader_never_saw_is_dropped_with_its_text() -> None:
    sink, events = open_memory_sink()
    sink.emit(text(0, 0, "wiped before the reader ran"))
    sink.emit(reset(1, 1))
    sink.emit(text(1, 2, "answer"))
    assert drain(events) == [text(1, 0, "answer")]
    assert sink.statistics().events_dropped == 2


def test_a_newer_reset_replaces_a_waiting_one() -> None:
    sink, events = open_memory_sink()
    sink.emit(text(0, 0, "a"))
    drain(events)
    sink.emit(reset(1, 1))
    sink.emit(text(1, 2, "b"))
    sink.emit(ResetEvent(turn_id="t1", epoch=2, seq=3, reason="structured_output_retry"))
    assert drain(events) == [
        ResetEvent(turn_id="t1", epoch=2, seq=1, reason="structured_output_retry")
    ]


def test_other_items_pass_in_order_and_untouched() -> None:
    sink: CoalescingSink[object] = CoalescingSink()
    marker = object()
    sink.send_nowait(marker)
    sink.emit(text(0, 0, "a"))
    sink.send_nowait(1)
    assert drain(sink.receiver) == [marker, text(0, 0, "a"), 1]


def test_emit_refuses_what_is_not_a_turn_event_by_name() -> None:
    sink, _events = open_memory_sink()
    with pytest.raises(TypeError, match=r"CoalescingSink.emit: expected a TextEvent or ResetEvent"):
        sink.emit("text")  # type: ignore[arg-type]


# --- the coalescing channel: its two ends closing ------------------------------------------


async def test_async_with_the_pair_ends_the_reader_after_everything_was_taken() -> None:
    seen: list[TurnStreamEvent] = []
    view = TurnTextView("t1")

    async def render(events: CoalescingReceiver[TurnStreamEvent]) -> None:
        async for event in events:
            seen.append(event)
            view.apply(event)

    # The pair's block is left first, closing the sink while render() still
    # has "fin" + "al" to take; the task group then waits for it to end.
    async with anyio.create_task_group() as tg, open_memory_sink() as (sink, events):
        tg.start_soon(render, events)
        stream = TurnTextStream(sink=sink, turn_id="t1")
        stream.begin_attempt()
        for piece in ["par", "tial"]:
            stream.observe(piece)
            await anyio.sleep(0.5)
        stream.begin_attempt()
        stream.observe("fin")
        stream.observe("al")
        stream.finish("succeeded")
    assert view.text == "final"
    assert [type(e).__name__ for e in seen] == ["TextEvent", "TextEvent", "ResetEvent", "TextEvent"]
    assert stream.sink_errors == 0


async def test_the_pair_closes_the_sink_even_when_the_block_raises() -> None:
    pair = open_memory_sink()
    sink, events = pair

    async def fails() -> None:
        async with pair:
            sink.emit(text(0, 0, "a"))
            raise RuntimeError

    with pytest.raises(RuntimeError):
        await fails()
    assert [e async for e in events] == [text(0, 0, "a")]
    with pytest.raises(anyio.ClosedResourceError):
        sink.emit(text(0, 1, "late"))


def test_a_streams_text_reaches_the_reader_with_its_turn_and_epoch() -> None:
    # A TurnTextStream hands this sink its text without building an event (the
    # fast path); what the reader gets must be what the events would have said.
    sink, events = open_memory_sink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.observe("a")
    stream.observe("b")
    assert drain(events) == [text(0, 0, "ab")]
    stream.begin_attempt("attempt_failed")
    stream.observe("c")
    second = TurnTextStream(sink=sink, turn_id="t2")
    second.begin_attempt()
    second.observe("d")
    stream.observe("e")
    assert drain(events) == [
        reset(1, 1),
        text(1, 2, "c"),
        text(0, 0, "d", turn="t2"),
        text(1, 3, "e"),
    ]
    assert (stream.sink_errors, second.sink_errors) == (0, 0)


async def test_a_closed_reader_makes_emit_raise_and_the_stream_count_it() -> None:
    sink, events = open_memory_sink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.observe("a")
    await events.aclose()
    stream.observe("b")  # BrokenResourceError inside emit
    assert (stream.sink_errors, stream.produced_output) == (1, False)
    stream.begin_attempt()
    stream.observe("c")  # the reset is lost: routing must stop replaying
    assert stream.sink_errors == 2
    assert stream.produced_output is True
    assert sink.statistics().reader_closed
    with pytest.raises(anyio.ClosedResourceError):
        events.receive_nowait()


async def test_closing_the_reader_wakes_a_receive_that_waits() -> None:
    sink, events = open_memory_sink()
    failures: list[BaseException] = []

    async def reader() -> None:
        try:
            await events.receive()
        except anyio.ClosedResourceError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.sleep(1)
        events.close()
    assert len(failures) == 1
    sink.close()


async def test_a_second_reader_is_refused_not_left_waiting_for_ever() -> None:
    sink, events = open_memory_sink()
    got: list[object] = []

    async def reader() -> None:
        got.append(await events.receive())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.sleep(1)  # the first reader waits
        with pytest.raises(anyio.BusyResourceError), anyio.fail_after(5):
            await events.receive()
        sink.emit(text(0, 0, "one reader"))
    assert got == [text(0, 0, "one reader")]
    # Once the first receive ended, the next one is welcome again.
    sink.close()
    with pytest.raises(anyio.EndOfStream):
        await events.receive()


async def test_a_cancelled_receive_loses_nothing() -> None:
    sink, events = open_memory_sink()
    with anyio.move_on_after(1):
        await events.receive()
    sink.emit(text(0, 0, "kept"))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await events.receive()  # cancelled at its first checkpoint, before taking
    assert await events.receive() == text(0, 0, "kept")
    sink.close()
    with pytest.raises(anyio.EndOfStream):
        await events.receive()


async def test_a_slow_reader_never_holds_the_producer_up() -> None:
    sink, events = open_memory_sink()
    views: list[str] = []
    view = TurnTextView("t1")
    stream = TurnTextStream(sink=sink, turn_id="t1")
    start = anyio.current_time()

    async def slow_reader() -> None:
        async for event in events:
            view.apply(event)
            views.append(view.text)
            await anyio.sleep(1)  # far slower than the producer

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow_reader)
        stream.begin_attempt()
        for i in range(100):
            stream.observe(f"{i},")
            await anyio.sleep(0.01)
        produced_at = anyio.current_time() - start
        stream.finish("succeeded")
        sink.close()
    assert produced_at == pytest.approx(1.0)  # 100 x 10 ms: never waited for the reader
    final = "".join(f"{i}," for i in range(100))
    assert view.text == final
    assert all(final.startswith(state) for state in views)
    assert len(views) < 10  # one hand-off per reader wake-up, not per delta


async def test_text_is_handed_over_at_most_once_per_interval() -> None:
    sink, events = open_memory_sink(interval=0.1)
    start = anyio.current_time()
    sink.emit(text(0, 0, "a"))
    assert await events.receive() == text(0, 0, "a")
    assert anyio.current_time() == start  # the first text comes at once
    sink.emit(text(0, 1, "b"))

    async def more() -> None:
        await anyio.sleep(0.05)
        sink.emit(text(0, 2, "c"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(more)
        # Too soon after "a": the reader waits out the interval while "c" merges in.
        assert await events.receive() == text(0, 1, "bc")
    assert anyio.current_time() - start == pytest.approx(0.1)
    await anyio.sleep(0.5)
    sink.emit(text(0, 3, "d"))  # after a pause longer than the interval: at once
    before = anyio.current_time()
    assert await events.receive() == text(0, 2, "d")
    assert anyio.current_time() == before


async def test_other_items_and_a_closed_sinks_text_are_not_paced() -> None:
    sink: CoalescingSink[Any] = CoalescingSink(interval=10)
    events = sink.receiver
    sink.emit(text(0, 0, "a"))
    start = anyio.current_time()
    assert await events.receive() == text(0, 0, "a")
    sink.send_nowait("tool call")
    sink.emit(text(0, 1, "b"))
    assert await events.receive() == "tool call"
    sink.close()
    assert await events.receive() == text(0, 1, "b")
    assert anyio.current_time() == start


@pytest.mark.parametrize("text_waiting", [True, False])
async def test_a_close_ends_a_reader_that_is_waiting_out_the_interval(text_waiting: bool) -> None:
    # The reader of a finished turn ends at the close, not an interval later:
    # a task group around it (the documented pattern) would otherwise hold the
    # turn's end back by up to a frame.
    sink: CoalescingSink[Any] = CoalescingSink(interval=10)
    events = sink.receiver
    sink.emit(text(0, 0, "a"))
    start = anyio.current_time()
    assert await events.receive() == text(0, 0, "a")
    got: list[tuple[float, Any]] = []

    async def read() -> None:
        async for item in events:
            got.append((anyio.current_time() - start, item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await anyio.sleep(1)
        if text_waiting:
            sink.emit(text(0, 1, "b"))
            await anyio.sleep(1)
            assert got == []  # text alone still waits out the interval
        sink.close()
    assert anyio.current_time() - start == pytest.approx(2 if text_waiting else 1)
    # Virtual clock: the sleeps add up to exact times.
    assert got == ([(2.0, text(0, 1, "b"))] if text_waiting else [])


@pytest.mark.parametrize("arrives", ["item", "reset", "reader_close"])
async def test_a_pacing_reader_is_woken_by_anything_but_text(arrives: str) -> None:
    sink: CoalescingSink[Any] = CoalescingSink(interval=10)
    events = sink.receiver
    sink.emit(text(0, 0, "a"))
    start = anyio.current_time()
    assert await events.receive() == text(0, 0, "a")
    sink.emit(text(0, 1, "b"))
    got: list[tuple[float, Any]] = []
    refused: list[BaseException] = []

    async def read() -> None:
        try:
            async for item in events:
                got.append((anyio.current_time() - start, item))
        except anyio.ClosedResourceError as error:
            refused.append(error)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await anyio.sleep(1)
        if arrives == "item":
            sink.send_nowait("tool call")
        elif arrives == "reset":
            sink.emit(reset(0, 2))
        else:
            events.close()
        await anyio.lowlevel.checkpoint()
        sink.close()  # ends a reader still waiting for a second item
    assert anyio.current_time() - start == pytest.approx(1)
    if arrives == "item":
        # In order: the text ahead of the item comes with it, not an interval later.
        assert got == [(1, text(0, 1, "b")), (1, "tool call")]
    elif arrives == "reset":
        # "b" was never shown, so the reset drops it and comes at once.
        assert got == [(1, reset(0, 1))]
    else:
        assert got == []
        assert len(refused) == 1


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "1", True, None])
def test_interval_is_refused_by_name(bad: object) -> None:
    number = isinstance(bad, int | float) and not isinstance(bad, bool)
    error = ValueError if number else TypeError
    with pytest.raises(error, match=r"CoalescingSink: interval must be a finite non-negative"):
        CoalescingSink(interval=bad)  # type: ignore[arg-type]
    with pytest.raises(error, match=r"open_memory_sink: interval must be"):
        open_memory_sink(interval=bad)  # type: ignore[arg-type]


# --- reprs and checks --------------------------------------------------------------------------


async def test_reprs_show_buffer_use_not_internals() -> None:
    sink, events = open_memory_sink()
    sink.emit(text(0, 0, "abc"))
    sink.emit(text(0, 1, "de"))
    assert repr(sink) == (
        "<CoalescingSink open retractable=True pending=1 items (5 chars) "
        "delivered=0 merged=1 dropped=0>"
    )
    assert repr(events).startswith("<CoalescingReceiver of <CoalescingSink open")
    send, receive = anyio.create_memory_object_stream[TurnStreamEvent](4)
    memory = MemoryStreamSink(send)
    memory.emit(text(0, 0, "x"))
    assert repr(memory) == "<MemoryStreamSink open retractable=True buffered=1/4>"
    receive.close()
    assert repr(memory) == "<MemoryStreamSink reader closed retractable=True buffered=1/4>"
    send.close()
    assert "closed" in repr(memory)
    unbounded_send, unbounded_receive = anyio.create_memory_object_stream[TurnStreamEvent](math.inf)
    assert "buffered=0/unbounded" in repr(MemoryStreamSink(unbounded_send))
    unbounded_send.close()
    unbounded_receive.close()


def test_sinks_satisfy_the_protocol() -> None:
    assert isinstance(ListSink(), TurnStreamSink)
    sink, _events = open_memory_sink()
    assert isinstance(sink, TurnStreamSink)
    assert sink.retractable is True
    assert open_memory_sink(retractable=False).sink.retractable is False
    assert isinstance(open_memory_sink(), MemorySinkPair)
    send, receive = anyio.create_memory_object_stream[TurnStreamEvent](1)
    assert isinstance(MemoryStreamSink(send), TurnStreamSink)
    send.close()
    receive.close()


def test_sink_flags_are_validated() -> None:
    with pytest.raises(TypeError, match=r"ListSink: retractable must be a bool, got 1"):
        ListSink(retractable=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"open_memory_sink: retractable must be a bool, got 1"):
        open_memory_sink(retractable=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"CoalescingSink: retractable must be a bool, got 'no'"):
        CoalescingSink(retractable="no")  # type: ignore[arg-type]
    send, receive = anyio.create_memory_object_stream[TurnStreamEvent](1)
    with pytest.raises(TypeError, match=r"MemoryStreamSink: retractable must be a bool, got 'no'"):
        MemoryStreamSink(send, retractable="no")  # type: ignore[arg-type]
    send.close()
    receive.close()


def test_memory_stream_sink_refuses_what_is_not_a_send_stream() -> None:
    # Accepted, every event would fail inside emit and be counted as a sink
    # error: the reader would silently get nothing, for the whole turn.
    send, receive = anyio.create_memory_object_stream[object](1)
    for bad in (object(), receive, None):
        with pytest.raises(
            TypeError, match=r"MemoryStreamSink: send_stream must be a MemoryObjectSendStream, got"
        ):
            MemoryStreamSink(bad)  # type: ignore[arg-type]
    send.close()
    receive.close()


async def test_memory_stream_sink_is_per_event_and_counts_a_full_buffer() -> None:
    send, receive = anyio.create_memory_object_stream[TurnStreamEvent](2)
    stream = TurnTextStream(sink=MemoryStreamSink(send), turn_id="t1")
    stream.begin_attempt()
    for piece in "abcd":
        stream.observe(piece)
    assert stream.sink_errors == 2  # "c" and "d" found the buffer full
    assert [receive.receive_nowait(), receive.receive_nowait()] == [
        text(0, 0, "a"),
        text(0, 1, "b"),
    ]
    receive.close()
    send.close()


# --- the invariant, over any interleaving ---------------------------------------------------


class _Tee:
    """Hands every event to the coalescing sink and records it for a lossless reference."""

    retractable = True

    def __init__(self, sink: CoalescingSink[Any]) -> None:
        self.sink = sink
        self.events: list[TurnStreamEvent] = []

    def emit(self, event: TurnStreamEvent) -> None:
        self.events.append(event)
        self.sink.emit(event)


_STEPS = st.lists(
    st.one_of(
        st.just(("attempt",)),
        st.tuples(st.just("text"), st.text(alphabet="abc", min_size=1, max_size=3)),
        st.just(("read",)),
        st.just(("item",)),
        st.just(("next_turn",)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps=_STEPS)
def test_any_interleaving_shows_only_states_the_turn_passed_through(
    steps: list[tuple[Any, ...]],
) -> None:
    """Producer and reader steps in any order: the reader's view of every turn goes
    through a subsequence of the states a lossless reader goes through, ends
    exactly on the turn's text, and waiting items never outgrow the text.
    """
    sink: CoalescingSink[Any] = CoalescingSink()
    tee = _Tee(sink)
    turn = 0
    streams = [TurnTextStream(sink=tee, turn_id="turn-0")]
    streams[0].begin_attempt()
    views: dict[str, TurnTextView] = {}
    shown: dict[str, list[str]] = {}
    items_sent: list[int] = []
    items_seen: list[int] = []
    next_seq: dict[str, int] = {}

    def read_one() -> bool:
        try:
            item = sink.receiver.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            return False
        if isinstance(item, int):
            items_seen.append(item)
            return True
        assert item.seq == next_seq.get(item.turn_id, 0)  # gap-free, per turn
        next_seq[item.turn_id] = item.seq + 1
        view = views.setdefault(item.turn_id, TurnTextView(item.turn_id))
        assert view.apply(item)
        shown.setdefault(item.turn_id, []).append(view.text)
        return True

    for step in steps:
        stream = streams[-1]
        if step[0] == "attempt":
            stream.begin_attempt()
        elif step[0] == "text":
            stream.observe(step[1])
        elif step[0] == "read":
            read_one()
        elif step[0] == "item":
            items_sent.append(len(items_sent))
            sink.send_nowait(items_sent[-1])
        else:
            stream.finish("succeeded")
            turn += 1
            streams.append(TurnTextStream(sink=tee, turn_id=f"turn-{turn}"))
            streams[-1].begin_attempt()
        stats = sink.statistics()
        # Bounded by the text, not the events: per turn at most a reset and a
        # run of text, plus the other items and what they split.
        assert stats.items_pending <= 2 * len(streams) + 2 * len(items_sent)
    streams[-1].finish("succeeded")
    sink.close()
    while read_one():
        pass
    assert items_seen == items_sent
    # The lossless reference: every event, one by one.
    for stream in streams:
        turn_id = stream.turn_id
        reference = TurnTextView(turn_id)
        states = [""]
        for event in tee.events:
            if event.turn_id == turn_id:
                reference.apply(event)
                states.append(reference.text)
        final = views[turn_id].text if turn_id in views else ""
        assert final == reference.text == stream.text
        # A subsequence of the states the turn passed through, in order.
        position = 0
        for state in shown.get(turn_id, []):
            while states[position] != state:
                position += 1  # IndexError here: a state the turn never had
