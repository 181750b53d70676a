"""The harness's own cost per chunk, with no socket, server or JSON parsing in the way.

``bench_live_reader.py`` measures the whole path over a loopback server, where
a chunk costs the SDK and the server about 175 µs and the harness's few
microseconds sit inside that process's noise. Here the SDK's stream is
replaced by prebuilt ``ChatCompletionChunk`` objects with one checkpoint per
chunk (what a socket read costs the event loop at the least), so the
difference between the two variants is only what the harness adds:

* raw: ``async with`` the stream, ``async for`` the chunks, keep the text;
* harness: ``stream_chat_completion`` (watchdog, text stream, defect check)
  with a live reader, the recommended way (``open_memory_sink`` and a task
  rendering every event into a ``TurnTextView``), on its ``stream_path="sdk"``
  (the path that takes the SDK's chunk objects; the lean path's cost, with the
  event stream's splitting and parsing, is ``bench_lean_stream.py``'s).

Interleaved rounds (order alternated), CPU time; printed in µs per chunk,
best of the rounds and the paired median of the differences.

Run: ``python benchmarks/bench_chunk_cost.py [--rounds N] [--backend trio|asyncio|both]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import openai
from openai.types.chat import ChatCompletionChunk

from juno_bind_trio.completion import (
    CoalescingReceiver,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
    open_memory_sink,
)
from juno_bind_trio.providers.openai import stream_chat_completion

CHUNKS = 1000


def _chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


CHUNK_LIST = [_chunk({"content": f"tok{i} "}) for i in range(CHUNKS)] + [_chunk({}, "stop")]
EXPECTED = "".join(f"tok{i} " for i in range(CHUNKS))


class _Response:
    headers = {"content-type": "text/event-stream"}  # noqa: RUF012 - read only
    status_code = 200


class _PrebuiltStream:
    """What ``create(stream=True)`` returns, reduced to what both loops use."""

    response = _Response()

    async def __aenter__(self) -> _PrebuiltStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> AsyncIterator[ChatCompletionChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ChatCompletionChunk]:
        checkpoint = anyio.lowlevel.checkpoint
        for chunk in CHUNK_LIST:
            await checkpoint()
            yield chunk


async def _create(**_options: Any) -> _PrebuiltStream:
    return _PrebuiltStream()


def _client() -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(api_key="bench", base_url="http://127.0.0.1:9", max_retries=0)
    # The one seam both variants go through; nothing is ever sent.
    client.chat.completions.create = _create  # type: ignore[method-assign,assignment]
    return client


async def raw_turn(client: openai.AsyncOpenAI) -> str:
    parts = []
    stream: Any = await client.chat.completions.create(model="m", messages=[], stream=True)
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


async def _render(events: CoalescingReceiver[TurnStreamEvent], view: TurnTextView) -> None:
    async for event in events:
        view.apply(event)


async def harness_turn(client: openai.AsyncOpenAI) -> str:
    view = TurnTextView("t")
    async with anyio.create_task_group() as tg, open_memory_sink() as (sink, events):
        tg.start_soon(_render, events, view)
        stream = TurnTextStream(sink=sink, turn_id="t")
        stream.begin_attempt()
        await stream_chat_completion(
            client, model="m", messages=[], text_stream=stream, stream_path="sdk"
        )
        stream.finish("succeeded")
    return view.text


async def run_backend(rounds: int) -> tuple[float, float, float, float]:
    client = _client()
    variants: dict[str, Callable[[openai.AsyncOpenAI], Awaitable[str]]] = {
        "raw": raw_turn,
        "harness": harness_turn,
    }
    timings: dict[str, list[float]] = {name: [] for name in variants}
    for turn in variants.values():
        assert await turn(client) == EXPECTED
    for round_index in range(rounds):
        names = list(variants) if round_index % 2 else list(reversed(variants))
        for name in names:
            started = time.process_time()
            text = await variants[name](client)
            timings[name].append(time.process_time() - started)
            assert text == EXPECTED, name
    raw, harness = timings["raw"], timings["harness"]
    per_chunk = 1e6 / CHUNKS
    return (
        min(raw) * per_chunk,
        min(harness) * per_chunk,
        (min(harness) - min(raw)) * per_chunk,
        statistics.median(h - r for h, r in zip(harness, raw, strict=True)) * per_chunk,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    backends = ("trio", "asyncio") if args.backend == "both" else (args.backend,)
    print(
        f"The harness's own cost per chunk (prebuilt chunks, a checkpoint each, live reader), "
        f"{args.rounds} interleaved rounds, CPU time:"
    )
    for backend in backends:
        raw, harness, best, paired = anyio.run(run_backend, args.rounds, backend=backend)
        print(
            f"  {backend:8} raw loop {raw:5.2f} µs/chunk   harness {harness:5.2f} µs/chunk   "
            f"added {best:4.2f} µs (best of rounds), {paired:4.2f} µs (paired median)"
        )


if __name__ == "__main__":
    main()
