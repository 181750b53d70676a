"""Provider fallback and cancellation, end to end, with no API key.

    python examples/fallback_demo.py

Starts a fault-injecting OpenAI-compatible server on 127.0.0.1 and runs two
scenarios through the real ``openai`` SDK, the route executor, the tool pool
and the tool loop:

1. **Fallback.** The first provider dies mid-stream after some text has been
   shown, the second answers 429, and the fallback model succeeds with two
   tool calls, which run through the pool. The live rendering (driven by a
   ``TurnTextView``) shows the reset replacing the partial text.
2. **Cancellation.** The model asks for six slow tool calls (two workers),
   and the run's scope is cancelled while the first two are running: the
   queued four never start, and every call still has an answer in the
   transcript (``interrupted`` or ``not_run``).

With ``--base-url``, ``--api-key`` and ``--model`` (or ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``OPENAI_MODEL``) it runs the fallback scenario's turn
against a real OpenAI-compatible endpoint instead.

The scenarios are importable (:func:`fallback_scenario`,
:func:`cancel_scenario`), so a test can run them on a virtual clock.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import anyio
import attrs

from juno_bind_trio.completion import ResetEvent, TurnStreamEvent, TurnTextView, open_memory_sink
from juno_bind_trio.loop import LoopState, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteResult, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeResponse,
    Pause,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)

QUESTION = "What are 17 + 25 and 6 * 7? Use the tools."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} two integers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
    for name in ("add", "multiply")
]


# --- the live rendering ---------------------------------------------------------


@attrs.define(eq=False)
class LiveRenderer:
    """Renders each turn's text from its events, the way a browser client would.

    On a terminal it redraws the line in place, so a reset visibly replaces
    the partial text; elsewhere (a pipe, a test) it prints one line per epoch
    and one per reset.
    """

    out: TextIO
    live: bool = False
    views: dict[str, TurnTextView] = attrs.field(factory=dict)
    resets: int = 0
    _shown: str = ""

    def apply(self, event: TurnStreamEvent) -> None:
        view = self.views.get(event.turn_id)
        if view is None:
            view = self.views[event.turn_id] = TurnTextView(event.turn_id)
        before = view.text
        view.apply(event)
        if isinstance(event, ResetEvent):
            self.resets += 1
            self._line(f"  [{event.turn_id}] {before}", final=True)
            self.out.write(
                f"  [{event.turn_id}] ↺ reset ({event.reason}): that text is withdrawn\n"
            )
            return
        self._line(f"  [{event.turn_id}] {view.text}", final=False)

    def close(self) -> None:
        if self._shown:
            self._line(self._shown, final=True)

    def _line(self, text: str, *, final: bool) -> None:
        if self.live:
            self.out.write("\r\x1b[2K" + text + ("\n" if final else ""))
            self.out.flush()
            self._shown = "" if final else text
        elif final:
            self.out.write(text + "\n")
            self._shown = ""
        else:
            self._shown = text


async def render(receive: Any, renderer: LiveRenderer) -> None:
    async with receive:
        async for event in receive:
            renderer.apply(event)
    renderer.close()


# --- tools ---------------------------------------------------------------------------


def make_calculator(out: TextIO, delay: float) -> Any:
    async def run_tool_call(call: Any) -> ToolCallOutcome:
        args = json.loads(call["function"]["arguments"])
        name = call["function"]["name"]
        await anyio.sleep(delay)
        value = args["a"] + args["b"] if name == "add" else args["a"] * args["b"]
        out.write(f"  ⚙ {name}({args['a']}, {args['b']}) = {value}   [{call['id']}]\n")
        return ToolCallOutcome.from_content(call["id"], str(value))

    return run_tool_call


def describe_route(result: RouteResult[ModelTurnResult]) -> list[str]:
    lines = []
    for record in result.attempts:
        where = f"{record.candidate.provider}/{record.cursor.model}"
        if record.error is None:
            lines.append(f"    {where}: ok")
        else:
            action = record.action.value if record.action is not None else "-"
            error = f"{type(record.error).__name__}: {record.error}".splitlines()[0][:70]
            lines.append(f"    {where}: {error} -> {action}")
    return lines


# --- scenario 1: fallback ------------------------------------------------------------------


@attrs.frozen
class FallbackReport:
    answer: str | None
    routes: tuple[tuple[tuple[str, str, str | None], ...], ...]
    tool_answers: tuple[tuple[str, str], ...]
    resets: int
    final_texts: dict[str, str]


async def fallback_scenario(
    out: TextIO, *, live: bool = False, pace: float = 0.02
) -> FallbackReport:
    """The first provider dies mid-stream, the second answers 429, the fallback model succeeds."""
    primary: dict[str, list[FakeResponse]] = {
        "juno-large": [
            StreamResponse(
                [
                    TextDelta("Let me "),
                    TextDelta("work those "),
                    TextDelta("out in my head: 17 + 25 is"),
                    Pause(pace * 5),
                    Disconnect(),
                ],
                chunk_delay=pace,
            ),
            StreamResponse.of_text(
                "17 + 25 = 42, ", "and 6 × 7 = 42 ", "as well.", chunk_delay=pace
            ),
        ],
        "juno-small": [
            StreamResponse.of_tool_calls(
                ("call_add", "add", '{"a": 17, "b": 25}'),
                ("call_mul", "multiply", '{"a": 6, "b": 7}'),
                fragments=3,
                chunk_delay=pace,
            )
        ],
    }
    secondary: list[FakeResponse] = [ErrorResponse(429, "slow down", retry_after=30)]
    plan = RoutePlan(
        [
            RouteStage("juno-large", [Candidate("primary"), Candidate("secondary")]),
            RouteStage("juno-small", [Candidate("primary")]),
        ]
    )
    routes: list[RouteResult[ModelTurnResult]] = []
    renderer = LiveRenderer(out, live=live)
    out.write("Scenario 1: provider fallback with a live text view\n")
    out.write(f"  user: {QUESTION}\n")
    async with (
        open_fake_openai_server(primary) as server_a,
        open_fake_openai_server(secondary) as server_b,
        open_openai_client(base_url=server_a.base_url, api_key="demo") as client_a,
        open_openai_client(base_url=server_b.base_url, api_key="demo") as client_b,
        anyio.create_task_group() as tg,
    ):
        sink, receive = open_memory_sink()
        tg.start_soon(render, receive, renderer)
        model = OpenAIChatModel(
            plan=plan,
            clients={"primary": client_a, "secondary": client_b},
            time_to_first_token=5.0,
            inter_chunk_timeout=5.0,
            on_route=routes.append,
        )
        state = LoopState(messages=[{"role": "user", "content": QUESTION}])
        loop = ToolLoop(
            state=state,
            max_iterations=4,
            call_model=model,
            run_tool_call=make_calculator(out, pace),
            build_tools=lambda: TOOLS,
            text_sink=sink,
            run_id="demo",
        )
        result = await loop.run()
        sink.close()  # the reader takes what is left, then render() returns
    for index, route in enumerate(routes, 1):
        out.write(f"  turn {index} route:\n")
        for line in describe_route(route):
            out.write(line + "\n")
    out.write(f"  assistant: {result.content}\n\n")
    tool_answers = tuple(
        (m["tool_call_id"], m["content"]) for m in state.messages if m.get("role") == "tool"
    )
    return FallbackReport(
        answer=result.content,
        routes=tuple(
            tuple(
                (r.candidate.provider, r.cursor.model, None if r.action is None else r.action.value)
                for r in route.attempts
            )
            for route in routes
        ),
        tool_answers=tool_answers,
        resets=renderer.resets,
        final_texts={turn_id: view.text for turn_id, view in renderer.views.items()},
    )


# --- scenario 2: cancel in the middle of a batch -------------------------------------------


@attrs.frozen
class CancelReport:
    requested: tuple[str, ...]
    started: tuple[str, ...]
    answers: dict[str, str]
    cancelled: bool


async def cancel_scenario(out: TextIO, *, pace: float = 0.02) -> CancelReport:
    """Six slow calls, two workers; the run's scope is cancelled while the first two run."""
    calls = [(f"call_{i}", "lookup", json.dumps({"key": i})) for i in range(6)]
    started: list[str] = []
    two_running = anyio.Event()

    async def slow_lookup(call: Any) -> ToolCallOutcome:
        started.append(call["id"])
        out.write(f"  ▶ started {call['id']}\n")
        if len(started) == 2:
            two_running.set()
        await anyio.sleep(pace * 50)
        return ToolCallOutcome.from_content(call["id"], "found")

    out.write("Scenario 2: cancelling the run in the middle of a tool batch\n")
    state = LoopState(messages=[{"role": "user", "content": "look up six keys"}])
    async with (
        open_fake_openai_server([StreamResponse.of_tool_calls(*calls)]) as server,
        open_openai_client(base_url=server.base_url, api_key="demo") as client,
    ):
        plan = RoutePlan([RouteStage("juno-large", [Candidate("primary")])])
        model = OpenAIChatModel(plan=plan, clients={"primary": client})
        loop = ToolLoop(
            state=state,
            max_iterations=3,
            call_model=model,
            run_tool_call=slow_lookup,
            per_tool_limit=2,
        )
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_when_busy() -> None:
                    await two_running.wait()
                    await anyio.sleep(pace)
                    out.write("  ✋ cancelling the run's scope\n")
                    scope.cancel()

                tg.start_soon(cancel_when_busy)
                await loop.run()
    answers: dict[str, str] = {}
    for message in state.messages:
        if message.get("role") == "tool":
            content = message["content"]
            try:
                answers[message["tool_call_id"]] = json.loads(content).get("kind") or "failed"
            except (ValueError, AttributeError):
                answers[message["tool_call_id"]] = "ok"
    for call_id, _, _ in calls:
        where = "started" if call_id in started else "never started"
        out.write(f"  {call_id}: {where:13} -> answered {answers.get(call_id, 'NOT ANSWERED')}\n")
    out.write("\n")
    return CancelReport(
        requested=tuple(c[0] for c in calls),
        started=tuple(started),
        answers=answers,
        cancelled=scope.cancelled_caught,
    )


# --- against a real endpoint ------------------------------------------------------------------


async def real_endpoint(out: TextIO, base_url: str, api_key: str, model_name: str) -> int:
    renderer = LiveRenderer(out, live=out.isatty())
    routes: list[RouteResult[ModelTurnResult]] = []
    out.write(f"Running the turn against {base_url} ({model_name})\n  user: {QUESTION}\n")
    async with (
        open_openai_client(base_url=base_url, api_key=api_key) as client,
        anyio.create_task_group() as tg,
    ):
        sink, receive = open_memory_sink()
        tg.start_soon(render, receive, renderer)
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage(model_name, [Candidate("endpoint")])]),
            clients={"endpoint": client},
            on_route=routes.append,
        )
        state = LoopState(messages=[{"role": "user", "content": QUESTION}])
        loop = ToolLoop(
            state=state,
            max_iterations=4,
            call_model=model,
            run_tool_call=make_calculator(out, 0.0),
            build_tools=lambda: TOOLS,
            text_sink=sink,
        )
        try:
            result = await loop.run()
        finally:
            sink.close()
    for index, route in enumerate(routes, 1):
        out.write(f"  turn {index} route:\n" + "\n".join(describe_route(route)) + "\n")
    out.write(f"  assistant: {result.content}\n")
    return 0


# --- main -------------------------------------------------------------------------------------


async def demo(out: TextIO, *, live: bool) -> int:
    started = time.perf_counter()
    fallback = await fallback_scenario(out, live=live)
    cancel = await cancel_scenario(out)
    never_started = [c for c in cancel.requested if c not in cancel.started]
    out.write("Summary\n")
    out.write(
        f"  fallback: {len(fallback.routes)} turns, attempts per turn "
        f"{[len(r) for r in fallback.routes]}, {fallback.resets} reset(s), "
        f"{len(fallback.tool_answers)} tool calls answered\n"
    )
    out.write(f"  answer:   {fallback.answer}\n")
    out.write(
        f"  cancel:   {len(cancel.started)} started, {len(never_started)} never started, "
        f"{len(cancel.answers)}/{len(cancel.requested)} answered in the transcript\n"
    )
    out.write(f"  took {time.perf_counter() - started:.2f}s\n")
    ok = (
        fallback.answer is not None
        and cancel.cancelled
        and set(cancel.answers) == set(cancel.requested)
        and all(cancel.answers[c] == "not_run" for c in never_started)
    )
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    args = parser.parse_args(argv)
    out = sys.stdout
    if args.base_url or args.model:
        missing = [
            flag
            for flag, value in (
                ("--base-url", args.base_url),
                ("--api-key", args.api_key),
                ("--model", args.model),
            )
            if not value
        ]
        if missing:
            parser.error(f"a real endpoint needs {', '.join(missing)} (or the OPENAI_* variables)")
        return anyio.run(
            real_endpoint, out, args.base_url, args.api_key, args.model, backend=args.backend
        )
    return anyio.run(functools.partial(demo, out, live=out.isatty()), backend=args.backend)


if __name__ == "__main__":
    sys.exit(main())
