"""Stream one turn to a live view across a failed attempt and its retry.

No network and no API key: the "provider" is a scripted async generator. The
first attempt streams half an answer and dies; the retry streams the whole
answer. A reader task renders the events with TurnTextView, the way a browser
client would, and you watch the reset replace the partial text.

    python examples/text_stream_demo.py

Needs only the base install (``pip install -e .`` in the checkout), no extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import trio

from juno_bind_trio.completion import (
    CoalescingReceiver,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
    open_memory_sink,
)


class ProviderDied(Exception):
    pass


async def scripted_provider(attempt: int) -> AsyncIterator[str]:
    words = ["The ", "answer ", "is ", "forty-", "two."]
    for i, word in enumerate(words):
        await trio.sleep(0.05)
        if attempt == 0 and i == 3:
            raise ProviderDied("connection reset mid-stream")
        yield word


async def render(events: CoalescingReceiver[TurnStreamEvent], view: TurnTextView) -> None:
    async with events:
        async for event in events:
            view.apply(event)
            label = "reset " if event.kind == "reset" else "text  "
            print(f"  {label} epoch={event.epoch} seq={event.seq:<2} screen: {view.text!r}")


async def main() -> int:
    view = TurnTextView("turn-1")
    async with trio.open_nursery() as nursery, open_memory_sink() as (sink, events):
        # Leaving this block closes the sink, so render() ends once it has
        # taken every event: there is no separate close to remember.
        nursery.start_soon(render, events, view)
        stream = TurnTextStream(sink=sink, turn_id="turn-1")
        ok = False
        for attempt in range(2):
            stream.begin_attempt()
            try:
                async for delta in scripted_provider(attempt):
                    stream.observe(delta)
                ok = True
                break
            except ProviderDied as exc:
                print(
                    f"  attempt {attempt} failed: {exc}; produced_output={stream.produced_output}"
                )
        stream.finish("succeeded" if ok else "failed")
    view.finalize()
    print(f"final screen: {view.text!r} (resets sent: {stream.reset_count})")
    return 0 if view.text == "The answer is forty-two." else 1


if __name__ == "__main__":
    raise SystemExit(trio.run(main))
