"""What one request costs the event loop, per adapter, on a long conversation (issue #30).

For each adapter, a conversation of 1, 21 and 81 messages (user and assistant
alternating, about 100 characters each, an assistant tool call and its tool
result every 10 messages, 5 tools offered), answered by the provider's fake on
loopback with one text chunk, so the request side dominates. Per turn:

* the CPU time of the whole streamed turn (this process: fake, SDK, harness);
* (trio only) the longest single task step during the turn, in thread CPU
  time, so other processes taking the core mid-step do not count.

Interleaved rounds (adapters and sizes alternated), medians. Issue #30's bar:
no task step longer than 5 ms.

Run: ``python benchmarks/bench_request_cost.py [--backend trio|asyncio] [--rounds N]
[--only anthropic,gemini,bedrock,openai-chat,responses]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.providers import ProviderAdapter, ProviderRequest
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.bedrock import BedrockAdapter, open_bedrock_client
from juno_bind_trio.providers.google import GeminiAdapter, open_gemini_client
from juno_bind_trio.providers.openai import (
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    open_openai_client,
)
from juno_bind_trio.testing import (
    StreamResponse,
    open_fake_anthropic_server,
    open_fake_bedrock_server,
    open_fake_gemini_server,
    open_fake_openai_server,
    open_fake_responses_server,
)

SIZES = (1, 21, 81)
ANSWER = StreamResponse.of_text("ok")
TEXT = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. "
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"Tool number {i}: looks something up and returns a short answer.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look up"},
                    "limit": {"type": "integer", "description": "at most this many"},
                },
                "required": ["query"],
            },
        },
    }
    for i in range(5)
]


def conversation(size: int) -> list[dict[str, Any]]:
    """*size* messages (``size % 10 == 1``) ending on a user message.

    Blocks of ten: user and assistant alternating, the fourth assistant turn a
    tool call, then its tool result and an assistant answer; a last user message.
    """
    assert size % 10 == 1, size
    messages: list[dict[str, Any]] = []
    for block in range(size // 10):
        for i in range(7):
            role = "user" if i % 2 == 0 else "assistant"
            messages.append({"role": role, "content": f"{block}.{i}: {TEXT}"[:100]})
        call_id = f"call_{block}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "tool_1", "arguments": '{"query": "fox"}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": TEXT[:100]})
        messages.append({"role": "assistant", "content": f"{block}.9: {TEXT}"[:100]})
    messages.append({"role": "user", "content": TEXT[:100]})
    assert len(messages) == size
    return messages


Opener = Callable[[AsyncExitStack], Any]


async def anthropic_side(stack: AsyncExitStack) -> ProviderAdapter:
    server = await stack.enter_async_context(open_fake_anthropic_server(lambda _r: ANSWER))
    client = await stack.enter_async_context(
        open_anthropic_client(base_url=server.base_url, api_key="bench")
    )
    return AnthropicAdapter(client)


async def gemini_side(stack: AsyncExitStack) -> ProviderAdapter:
    server = await stack.enter_async_context(open_fake_gemini_server(lambda _r: ANSWER))
    client = await stack.enter_async_context(
        open_gemini_client(base_url=server.base_url, api_key="bench")
    )
    return GeminiAdapter(client)


async def bedrock_side(stack: AsyncExitStack) -> ProviderAdapter:
    server = await stack.enter_async_context(open_fake_bedrock_server(lambda _r: ANSWER))
    client = await stack.enter_async_context(
        open_bedrock_client(
            region="us-east-1",
            endpoint_url=server.base_url,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
    )
    return BedrockAdapter(client)


async def chat_side(stack: AsyncExitStack) -> ProviderAdapter:
    server = await stack.enter_async_context(open_fake_openai_server(lambda _r: ANSWER))
    client = await stack.enter_async_context(
        open_openai_client(base_url=server.base_url, api_key="bench")
    )
    return OpenAIChatAdapter(client)


async def responses_side(stack: AsyncExitStack) -> ProviderAdapter:
    server = await stack.enter_async_context(open_fake_responses_server(lambda _r: ANSWER))
    client = await stack.enter_async_context(
        open_openai_client(base_url=server.base_url, api_key="bench")
    )
    return OpenAIResponsesAdapter(client)


SIDES: dict[str, Opener] = {
    "anthropic": anthropic_side,
    "gemini": gemini_side,
    "bedrock": bedrock_side,
    "openai-chat": chat_side,
    "responses": responses_side,
}


class Steps:
    """The longest trio task step since :meth:`reset`, in thread CPU seconds."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._began: float | None = None

    def reset(self) -> None:
        self.longest = 0.0  # the step running now still counts when it ends

    def before_task_step(self, task: object) -> None:
        self._began = time.thread_time()

    def after_task_step(self, task: object) -> None:
        if self._began is not None:
            self.longest = max(self.longest, time.thread_time() - self._began)
            self._began = None


async def turn(adapter: ProviderAdapter, messages: list[dict[str, Any]]) -> str:
    stream = TurnTextStream(sink=ListSink(), turn_id="t")
    stream.begin_attempt()
    request = ProviderRequest(
        model="m",
        messages=messages,
        tools=TOOLS,
        text_stream=stream,
        time_to_first_token=30.0,
        inter_chunk_timeout=60.0,
    )
    result = await adapter.stream_turn(request)
    stream.finish("succeeded")
    return result.content or ""


@asynccontextmanager
async def instrumented(backend: str) -> AsyncIterator[Steps | None]:
    if backend != "trio":
        yield None
        return
    import trio

    class _Steps(Steps, trio.abc.Instrument):
        pass

    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        yield steps
    finally:
        trio.lowlevel.remove_instrument(steps)


async def main(backend: str, rounds: int, only: list[str]) -> None:
    conversations = {size: conversation(size) for size in SIZES}
    async with AsyncExitStack() as stack:
        adapters = {name: await SIDES[name](stack) for name in only}
        for adapter in adapters.values():  # warm every code path once
            for messages in conversations.values():
                assert await turn(adapter, messages) == "ok"
        cpu: dict[tuple[str, int], list[float]] = {}
        step: dict[tuple[str, int], list[float]] = {}
        cells = [(name, size) for name in adapters for size in SIZES]
        gc.collect()
        async with instrumented(backend) as steps:
            for index in range(rounds):
                order = cells if index % 2 == 0 else cells[::-1]
                for name, size in order:
                    # a fresh step for the turn's first, and one to end its last
                    await anyio.lowlevel.checkpoint()
                    if steps is not None:
                        steps.reset()
                    started = time.process_time()
                    assert await turn(adapters[name], conversations[size]) == "ok"
                    cpu.setdefault((name, size), []).append(time.process_time() - started)
                    await anyio.lowlevel.checkpoint()
                    if steps is not None:
                        step.setdefault((name, size), []).append(steps.longest)
    print(f"backend {backend}, median of {rounds} interleaved rounds, 5 tools, 1-chunk answer:")
    print(f"  {'adapter':12} {'msgs':>4}  {'CPU/turn ms':>11}  {'longest step ms':>15}")
    for name, size in cells:
        longest = f"{statistics.median(step[(name, size)]) * 1e3:15.2f}" if step else f"{'-':>15}"
        print(
            f"  {name:12} {size:4}  {statistics.median(cpu[(name, size)]) * 1e3:11.2f}  {longest}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--only", default=",".join(SIDES))
    args = parser.parse_args()
    anyio.run(main, args.backend, args.rounds, args.only.split(","), backend=args.backend)
