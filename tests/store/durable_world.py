"""A scripted model and two tools for durable-run tests, and the checks every run must pass.

``send`` is the non-repeatable effect (it appends its call id to ``effects``);
``read`` is repeatable. The model's script is indexed by how many assistant
messages the transcript already holds, so a resumed run is asked exactly the
turn it had not finished, as a real model given the same transcript would be.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import attrs
import openai

from juno_bind_trio.loop import (
    LoopResult,
    ModelTurn,
    ModelTurnResult,
    RunStats,
    ToolCallOutcome,
    ToolLoop,
)
from juno_bind_trio.providers.openai._client import prime_openai_client
from juno_bind_trio.run import EffectResumability, ToolCallLike, tool_call_id, tool_call_name
from juno_bind_trio.store import RunStore, open_durable_run
from juno_bind_trio.testing import (
    CompletionResponse,
    RecordedRequest,
    check_tool_call_history,
    open_fake_openai_server,
)
from juno_bind_trio.transcript import heal_transcript


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


SCRIPT: tuple[ModelTurnResult, ...] = (
    ModelTurnResult(tool_calls=(call("c1", "send", to="ann"), call("c2", "read", page=1))),
    ModelTurnResult(tool_calls=(call("c3", "send", to="bob"), call("c4", "send", to="cy"))),
    ModelTurnResult(content="all sent"),
)


Wiring = Literal["tool_loop", "by_hand"]


@attrs.define
class World:
    """What the tools did, across every worker that ran the run."""

    effects: list[str] = attrs.field(factory=list)  # send: call ids, in order
    reads: list[str] = attrs.field(factory=list)
    keys: dict[str, str] = attrs.field(factory=dict)  # call id -> idempotency key seen
    tool_seconds: float = 1.0
    idempotent_send: bool = False
    during_tool: Callable[[], Awaitable[None]] | None = None  # run inside every tool call

    def resumability(self, name: str) -> EffectResumability:
        return "non_repeatable" if name == "send" else "repeatable"

    def uses_key(self, name: str) -> bool:
        return self.idempotent_send and name == "send"


async def drive(
    store: RunStore,
    run_id: str,
    world: World,
    *,
    owner: str = "w1",
    script: Sequence[ModelTurnResult] = SCRIPT,
    wiring: Wiring = "tool_loop",
) -> LoopResult:
    """Claim the run, answer its open turn, run the loop to its end, record how it ended.

    *wiring*: the loop from ``run.tool_loop(...)``, or a ToolLoop given the
    run's five ports by hand (still supported; both must store the same run).
    """
    async with open_durable_run(
        store,
        run_id,
        owner=owner,
        lease_ttl=30,
        resumability=world.resumability,
        uses_idempotency_key=world.uses_key,
    ) as run:

        async def run_tool_call(tool_call: ToolCallLike) -> ToolCallOutcome:
            name, call_id = tool_call_name(tool_call), tool_call_id(tool_call)
            world.keys.setdefault(call_id, run.idempotency_key(tool_call))
            assert world.keys[call_id] == run.idempotency_key(tool_call)
            if name == "send":
                if world.idempotent_send and call_id in world.effects:
                    pass  # the service saw this key already: no second effect
                else:
                    world.effects.append(call_id)
            else:
                world.reads.append(call_id)
            if world.during_tool is not None:
                await world.during_tool()
            await anyio.sleep(world.tool_seconds)
            return ToolCallOutcome(
                tool_message={"role": "tool", "tool_call_id": call_id, "content": f"{name} ok"}
            )

        async def call_model(turn: ModelTurn) -> ModelTurnResult:
            await anyio.sleep(0.5)
            spoken = sum(1 for m in turn.messages if m["role"] == "assistant")
            return script[spoken]

        if run.answered:
            await run.finish("completed")
            return LoopResult(reason="completed", iterations=0, stats=RunStats())
        await run.finish_open_turn(run_tool_call)
        if wiring == "tool_loop":
            loop = run.tool_loop(
                call_model=call_model, run_tool_call=run_tool_call, max_iterations=10
            )
        else:
            loop = ToolLoop(
                state=run.state,
                max_iterations=10,
                call_model=run.wrap_call_model(call_model),
                run_tool_call=run.wrap_tool_call(run_tool_call),
                save_session=run.save_session,
                stop=run.stop,
                run_id=run_id,
            )
        result = await loop.run()
        await run.finish(result.reason)
    return result


def check_history(messages: list[dict[str, Any]]) -> None:
    """The tool-call history a provider demands: every call answered once, right after it."""
    check_tool_call_history(messages)  # the rules the real API refuses a request for
    assert heal_transcript(messages).changes == ()


async def provider_accepts(*transcripts: list[dict[str, Any]]) -> None:
    """Send each transcript, as the next request of its run, to the fake server (which
    validates tool-call history as the real API does) through the real SDK: each is answered."""

    def answer(request: RecordedRequest) -> CompletionResponse:
        return CompletionResponse(content=f"accepted #{request.index}")

    async with (
        open_fake_openai_server(answer) as server,
        openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client,
    ):
        await prime_openai_client(client)
        for index, messages in enumerate(transcripts):
            completion = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
            assert completion.choices[0].message.content == f"accepted #{index}"
        assert len(server.requests) == len(transcripts)
