"""The sinks that ship: a list, and an anyio memory object stream."""

from __future__ import annotations

import anyio
import pytest

from juno_bind_trio.completion import (
    ListSink,
    MemoryStreamSink,
    TextEvent,
    TurnStreamSink,
    TurnTextStream,
    TurnTextView,
    open_memory_sink,
)

pytestmark = pytest.mark.anyio


async def test_memory_sink_feeds_a_view_in_another_task() -> None:
    sink, receive = open_memory_sink()
    view = TurnTextView("t1")
    stream = TurnTextStream(sink=sink, turn_id="t1")
    start = anyio.current_time()

    async def reader() -> None:
        async with receive:
            async for event in receive:
                view.apply(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        stream.begin_attempt()
        for piece in ["par", "tial"]:
            stream.observe(piece)
            await anyio.sleep(0.5)
        stream.begin_attempt()
        stream.observe("final")
        stream.finish("succeeded")
        await sink.send_stream.aclose()
    assert view.text == "final"
    assert anyio.current_time() - start == 1.0
    assert stream.sink_errors == 0


async def test_full_buffer_counts_a_sink_error_and_never_blocks_the_turn() -> None:
    sink, receive = open_memory_sink(2)
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    for piece in "abcd":
        stream.observe(piece)
    assert stream.sink_errors == 2  # "c" and "d" found the buffer full
    received = [receive.receive_nowait(), receive.receive_nowait()]
    assert [e.text for e in received if isinstance(e, TextEvent)] == ["a", "b"]
    await receive.aclose()
    await sink.send_stream.aclose()


async def test_closed_reader_counts_sink_errors_and_a_lost_reset_latches() -> None:
    sink, receive = open_memory_sink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.observe("a")
    await receive.aclose()
    stream.observe("b")  # BrokenResourceError inside emit
    assert (stream.sink_errors, stream.produced_output) == (1, False)
    stream.begin_attempt()
    stream.observe("c")  # the reset is lost: routing must stop replaying
    assert stream.sink_errors == 2
    assert stream.produced_output is True
    await sink.send_stream.aclose()


def test_sinks_satisfy_the_protocol() -> None:
    assert isinstance(ListSink(), TurnStreamSink)
    send, receive = anyio.create_memory_object_stream[object](1)
    sink = MemoryStreamSink(send)
    assert isinstance(sink, TurnStreamSink)
    assert sink.retractable is True
    send.close()
    receive.close()


def test_sink_flags_are_validated() -> None:
    with pytest.raises(TypeError, match=r"retractable must be a bool, got 1"):
        ListSink(retractable=1)  # type: ignore[arg-type]
    send, receive = anyio.create_memory_object_stream[object](1)
    with pytest.raises(TypeError, match=r"retractable must be a bool, got 'no'"):
        MemoryStreamSink(send, retractable="no")  # type: ignore[arg-type]
    send.close()
    receive.close()


def test_memory_sink_refuses_what_is_not_a_send_stream() -> None:
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


@pytest.mark.parametrize(
    ("bad", "error"), [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("8", TypeError)]
)
def test_open_memory_sink_refuses_a_bad_buffer_size_by_name(bad: object, error: type) -> None:
    with pytest.raises(
        error,
        match=r"open_memory_sink: max_buffer_size must be a non-negative integer or math.inf, got "
        + repr(bad).replace(".", r"\."),
    ):
        open_memory_sink(bad)  # type: ignore[arg-type]
