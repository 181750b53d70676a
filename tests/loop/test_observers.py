"""The events channel out, the interrupts channel in, and the per-turn text stream."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
import trio
import trio.testing
from anyio.streams.memory import MemoryObjectReceiveStream
from loop_scripts import Host, Turn, call

from juno_bind_trio.completion import ListSink, TurnStreamSink
from juno_bind_trio.loop import (
    AssistantMessageEvent,
    Interrupt,
    InterruptReceivedEvent,
    LoopEvent,
    OutputProgressEvent,
    StatusEvent,
    ThinkingEvent,
    ToolCallRejectedEvent,
    ToolLoopStatistics,
)

pytestmark = pytest.mark.anyio


def drain(receive: MemoryObjectReceiveStream[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return out


def two_turns() -> list[Turn]:
    return [
        Turn(
            content="checking",
            reasoning="hmm",
            calls=[call("a"), call("b", fail="boom")],
            output_tokens=7,
        ),
        Turn(content="done"),
    ]


async def test_the_events_of_a_run_in_order() -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    host = Host(two_turns())
    loop = host.loop(events=send)
    await loop.run()
    events = drain(receive)
    rejected = events[5]
    assert isinstance(rejected, ToolCallRejectedEvent)
    assert isinstance(rejected.error, RuntimeError)
    assert events == [
        StatusEvent(1, "calling_model"),
        OutputProgressEvent(1, 7, 2),
        ThinkingEvent(1, "hmm"),
        AssistantMessageEvent(1, "checking", True),
        StatusEvent(1, "running_tools"),
        ToolCallRejectedEvent(1, "b", "work", None, "RuntimeError: boom", rejected.error),
        StatusEvent(1, "saving_session"),
        StatusEvent(2, "calling_model"),
        OutputProgressEvent(2, 5, 0),
        AssistantMessageEvent(2, "done", False),
        StatusEvent(2, "saving_session"),
    ]
    assert loop.statistics() == ToolLoopStatistics(
        iterations=2, events_sent=11, events_dropped=0, interrupts_received=0
    )
    # The loop never closes a channel it was given.
    send.send_nowait(StatusEvent(9, "compacting"))
    send.close()
    receive.close()


async def test_a_full_events_channel_drops_and_counts_and_changes_nothing() -> None:
    plain = Host(two_turns())
    plain_result = await plain.loop().run()

    send, receive = anyio.create_memory_object_stream[LoopEvent](2)
    host = Host(two_turns())
    loop = host.loop(events=send)
    start = anyio.current_time()
    result = await loop.run()
    assert anyio.current_time() - start == 2.0
    assert result == plain_result
    assert host.state.messages == plain.state.messages
    assert loop.statistics().events_sent == 2
    assert loop.statistics().events_dropped == 9
    assert drain(receive) == [StatusEvent(1, "calling_model"), OutputProgressEvent(1, 7, 2)]
    send.close()
    receive.close()


@pytest.mark.parametrize("closed_end", ["receive", "send"])
async def test_a_closed_events_channel_drops_and_counts(closed_end: str) -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](10)
    if closed_end == "receive":
        receive.close()
    else:
        send.close()
    host = Host(two_turns())
    loop = host.loop(events=send)
    result = await loop.run()
    assert result.reason == "completed"
    assert loop.statistics().events_sent == 0
    assert loop.statistics().events_dropped == 11
    send.close()
    receive.close()


async def test_an_observer_that_raises_is_counted_not_raised() -> None:
    class Exploding:
        def send_nowait(self, event: object) -> None:
            raise ValueError("logger broke")

    host = Host(two_turns())
    loop = host.loop(events=Exploding())
    result = await loop.run()
    assert result.reason == "completed"
    assert loop.statistics().events_dropped == 11


async def test_interrupts_are_drained_before_each_model_call() -> None:
    send, receive = anyio.create_memory_object_stream[Interrupt](10)
    events_send, events_receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    send.send_nowait(Interrupt("first"))
    send.send_nowait(Interrupt("second", user_id="u1"))
    host = Host([Turn(calls=[call("a", delay=2)]), Turn(content="ok")])
    loop = host.loop(interrupts=receive, events=events_send)

    async def interrupt_during_the_tool() -> None:
        await anyio.sleep(1.5)
        send.send_nowait(Interrupt("third"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupt_during_the_tool)
        await loop.run()
    roles = [(m["role"], m.get("content")) for m in host.state.messages]
    assert roles == [
        ("user", "hello"),
        ("user", "first"),
        ("user", "second"),
        ("assistant", None),
        ("tool", '{"ok": "a"}'),
        ("user", "third"),
        ("assistant", "ok"),
    ]
    assert host.model.seen_lengths == [3, 6]
    received = [e for e in drain(events_receive) if isinstance(e, InterruptReceivedEvent)]
    assert received == [
        InterruptReceivedEvent(1, Interrupt("first")),
        InterruptReceivedEvent(1, Interrupt("second", user_id="u1")),
        InterruptReceivedEvent(2, Interrupt("third")),
    ]
    assert loop.statistics().interrupts_received == 3
    # One sent after the last model call is left for the host.
    send.send_nowait(Interrupt("late"))
    assert receive.receive_nowait() == Interrupt("late")
    for stream in (send, receive, events_send, events_receive):
        stream.close()


async def test_a_closed_interrupts_channel_is_not_an_error() -> None:
    send, receive = anyio.create_memory_object_stream[Interrupt](10)
    send.send_nowait(Interrupt("only"))
    send.close()
    host = Host([Turn(calls=[call("a")]), Turn(content="ok")])
    loop = host.loop(interrupts=receive)
    result = await loop.run()
    assert result.reason == "completed"
    assert loop.statistics().interrupts_received == 1
    receive.close()


async def test_an_interrupt_that_is_not_an_interrupt_is_refused() -> None:
    send, receive = anyio.create_memory_object_stream[Any](10)
    send.send_nowait("just a string")
    host = Host([Turn(content="x")])
    with pytest.raises(
        TypeError, match=r"interrupts must carry Interrupt items, got 'just a string'"
    ):
        await host.loop(interrupts=receive).run()
    send.close()
    receive.close()


def test_trio_channels_serve_too() -> None:
    """A Trio host may hand over trio's own memory channels (run on trio itself)."""

    async def main() -> None:
        send, _receive = trio.open_memory_channel[LoopEvent](0)
        isend, ireceive = trio.open_memory_channel[Interrupt](1)
        isend.send_nowait(Interrupt("hi"))
        isend.close()
        host = Host([Turn(content="x")])
        loop = host.loop(events=send, interrupts=ireceive)
        await loop.run()
        # a zero-sized channel nobody reads: every event dropped, none raised
        assert loop.statistics().events_dropped == 5
        assert loop.statistics().interrupts_received == 1
        assert host.state.messages[1] == {"role": "user", "content": "hi"}

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# --- the turn text stream ----------------------------------------------------------------


async def test_the_loop_owns_one_text_stream_per_turn_and_finishes_it() -> None:
    sink = ListSink()
    host = Host(
        [
            # A failed attempt streamed text; the retry called tools and said nothing.
            Turn(calls=[call("a")], lost=["let me"], failed_attempts=1),
            Turn(content="answer", deltas=["ans", "wer"]),
        ]
    )
    await host.loop(text_sink=sink).run()
    assert [e.to_wire() for e in sink.events] == [
        {"kind": "text", "turnId": "run:1", "epoch": 0, "seq": 0, "text": "let me"},
        # finish("succeeded") flushed the reset nothing else would have sent
        {"kind": "reset", "turnId": "run:1", "epoch": 1, "seq": 1, "reason": "attempt_failed"},
        {"kind": "text", "turnId": "run:2", "epoch": 0, "seq": 0, "text": "ans"},
        {"kind": "text", "turnId": "run:2", "epoch": 0, "seq": 1, "text": "wer"},
    ]
    streams = [t.text_stream for t in host.model.seen]
    assert all(s is not None and s.finished for s in streams)
    assert streams[0] is not streams[1]


async def test_a_failed_turn_finishes_its_stream_failed() -> None:
    sink = ListSink()
    host = Host([Turn(lost=["partial"], failed_attempts=1, error=ConnectionError("down"))])
    with pytest.raises(ConnectionError):
        await host.loop(text_sink=sink).run()
    # "failed" drops the armed reset: the partial text stays for the reader
    assert [e.to_wire()["kind"] for e in sink.events] == ["text"]
    stream = host.model.seen[0].text_stream
    assert stream is not None
    assert stream.finished


async def test_a_sink_factory_is_called_per_turn_with_its_turn_id() -> None:
    made: dict[str, ListSink] = {}

    def factory(turn_id: str) -> TurnStreamSink:
        made[turn_id] = ListSink(retractable=False)
        return made[turn_id]

    host = Host([Turn(calls=[call("a")], deltas=["x"]), Turn(content="y", deltas=["y"])])
    await host.loop(text_sink=factory, run_id="r7", max_text_resets=0).run()
    assert sorted(made) == ["r7:1", "r7:2"]
    assert [e.to_wire()["text"] for e in made["r7:2"].events] == ["y"]
    first = host.model.seen[0].text_stream
    assert first is not None
    assert first.max_resets == 0
    assert first.retractable is False


async def test_no_sink_no_stream() -> None:
    host = Host([Turn(content="x")])
    await host.loop().run()
    assert host.model.seen[0].text_stream is None
    assert host.model.seen[0].turn_id == "run:1"
