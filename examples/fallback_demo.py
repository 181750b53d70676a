"""Provider fallback and cancellation, end to end, with no API key.

    python examples/fallback_demo.py            # paced so you can watch it stream
    python examples/fallback_demo.py --fast     # as fast as the fake provider goes
    python examples/fallback_demo.py --help     # every flag

Starts fault-injecting fakes of the Anthropic Messages API and of an
OpenAI-compatible API on 127.0.0.1 and runs two scenarios through the real
``anthropic`` and ``openai`` SDKs, the route executor, the tool pool and the
tool loop:

1. **Fallback across providers.** Anthropic dies mid-stream after some text
   has been shown, OpenAI answers the same model with a 429, and OpenAI's
   fallback model succeeds with two tool calls, which run through the pool;
   Anthropic then answers the next turn, from a transcript that holds
   OpenAI's calls (its fake checks it as the real API would). The live rendering (driven by a
   ``TurnTextView``) withdraws the partial text at the reset (on a terminal
   it stays above the live line, struck through and marked withdrawn); each
   attempt's fate prints as it happens.
2. **Cancellation.** The model asks for six slow tool calls (two workers),
   and the run's scope is cancelled while the first two are running (paced:
   a second and a half after they start, so you can watch it land): the
   queued four never start, and every call still has an answer in the
   transcript (``interrupted`` or ``not_run``).

With ``--base-url``, ``--api-key`` and ``--model`` it runs the fallback
scenario's turn against a real OpenAI-compatible endpoint instead; if that
endpoint fails, two lines say which and why, and the exit status is 1.
Ctrl-C stops it at once (exit status 130).

Needs the ``[anthropic]`` extra (``pip install -e '.[anthropic]'`` in the checkout).

The scenarios are importable (``fallback_scenario``, ``cancel_scenario``), so
a test can run them on a virtual clock.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

import anyio
import attrs

from juno_bind_trio.completion import ResetEvent, TurnStreamEvent, TurnTextView, open_memory_sink
from juno_bind_trio.loop import LoopState, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers import RoutedModel
from juno_bind_trio.providers.anthropic import (
    AnthropicAdapter,
    classify_anthropic_error,
    open_anthropic_client,
)
from juno_bind_trio.providers.openai import (
    OpenAIChatAdapter,
    OpenAIChatModel,
    classify_openai_error,
    open_openai_client,
)
from juno_bind_trio.routing import (
    AttemptFailure,
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteResult,
    RouteStage,
    RoutingError,
)
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeResponse,
    Pause,
    StreamResponse,
    TextDelta,
    open_fake_anthropic_server,
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


# How fast the fake provider streams: about 30 tokens a second by default, so a
# person can watch the text arrive and be withdrawn; --fast is the old 50.
PACE: float = 1 / 30
FAST_PACE: float = 0.02
# How long the paced demo lets the cancel scenario's first two calls run before
# it cancels the run, so that a person sees them running and the cancel land
# (at full speed the whole scenario is over in some 40 ms).
WATCH: float = 1.5


def tokens(text: str) -> list[str]:
    """*text* in word-sized pieces, each with its trailing space: what a model streams."""
    return re.findall(r"\S+\s*", text)


# --- the live rendering ---------------------------------------------------------

STRUCK = "\x1b[2;9m"  # dim, struck through: text the reader was shown and is taken back
PLAIN = "\x1b[0m"


@attrs.define(eq=False)
class LiveRenderer:
    """Renders each turn's text from its events, the way a browser client would.

    On a terminal it redraws the turn's line in place: text grows as it
    arrives, and a reset takes the text off the live line, leaving it above,
    dimmed and struck through, marked withdrawn, so the reader sees what was
    taken back and why. Notes (the route trail, tool results) print above the
    live line. Elsewhere (a pipe, a test) it prints one line per epoch and one
    per reset.
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
            if self.live:
                # Withdrawn: the text leaves the live line, as it would leave a
                # page, and stays above it struck through, saying so.
                if before:
                    self.out.write(
                        f"\r\x1b[2K  [{event.turn_id}] {STRUCK}{before}{PLAIN}"
                        f"  ↺ withdrawn ({event.reason})\n"
                    )
                self._draw("")
            else:
                self.out.write(f"  [{event.turn_id}] {before}\n")
                self.out.write(
                    f"  [{event.turn_id}] ↺ reset ({event.reason}): that text is withdrawn\n"
                )
                self._shown = ""
            return
        self._show(f"  [{event.turn_id}] {view.text}")

    def note(self, line: str) -> None:
        """Print *line* above the live text, which stays where it was."""
        if self.live:
            self.out.write("\r\x1b[2K" + line + "\n" + self._shown)
            self.out.flush()
        else:
            self.out.write(line + "\n")

    def close(self) -> None:
        if self._shown:
            if self.live:
                self.out.write("\n")
                self.out.flush()
            else:
                self.out.write(self._shown + "\n")
        self._shown = ""

    def _show(self, text: str) -> None:
        if self.live:
            self._draw(text)
        else:
            self._shown = text

    def _draw(self, text: str) -> None:
        self.out.write("\r\x1b[2K" + text)
        self.out.flush()
        self._shown = text


async def render(receive: Any, renderer: LiveRenderer) -> None:
    async with receive:
        async for event in receive:
            renderer.apply(event)
    renderer.close()


# --- tools ---------------------------------------------------------------------------


def make_calculator(renderer: LiveRenderer, delay: float) -> Any:
    async def run_tool_call(call: Any) -> ToolCallOutcome:
        args = json.loads(call["function"]["arguments"])
        name = call["function"]["name"]
        await anyio.sleep(delay)
        value = args["a"] + args["b"] if name == "add" else args["a"] * args["b"]
        renderer.note(f"  ⚙ {name}({args['a']}, {args['b']}) = {value}   [{call['id']}]")
        return ToolCallOutcome.from_content(call["id"], str(value))

    return run_tool_call


# --- the route trail, as it happens -------------------------------------------------------


def next_move(plan: RoutePlan, verdict: ClassifiedError, cursor: RouteCursor) -> str:
    """Where routing goes after this failure, in words; never a candidate that is not there."""
    stages = plan.stages
    stage = stages[cursor.stage_index]
    later_candidate = cursor.candidate_index + 1 < len(stage.candidates)
    later_stage = cursor.stage_index + 1 < len(stages)
    action = verdict.action
    if action is RouteAction.RETRY_SAME_ENDPOINT:
        return "retrying the same endpoint"
    if action is RouteAction.NEXT_CANDIDATE and later_candidate:
        return "trying the next provider"
    if action in (RouteAction.NEXT_CANDIDATE, RouteAction.NEXT_STAGE) and later_stage:
        return f"falling back to {stages[cursor.stage_index + 1].model}"
    if action is RouteAction.PROPAGATE:
        return "giving up (not something another provider would fix)"
    return "no provider left to try"


def describe_error(error: BaseException) -> str:
    """The first line of *error* and of its root cause, short: what a person needs to read."""
    root = error
    while root.__cause__ is not None and len(root.__cause__.args) > 0:
        root = root.__cause__
    described = _first_line(error)
    if root is not error:
        described += f" ({_first_line(root)})"
    return described


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = text if len(text) <= 160 else text[:159] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def trail_classifier(
    plan: RoutePlan, renderer: LiveRenderer, judge: Any = classify_openai_error
) -> Any:
    """*judge* (``classify_openai_error``), printing each failed attempt the moment it is judged."""

    def classify(error: Exception, candidate: Candidate, cursor: RouteCursor) -> ClassifiedError:
        verdict: ClassifiedError = judge(error, candidate, cursor)
        renderer.note(
            f"  ✗ {candidate.provider}/{cursor.model}: {verdict.reason or describe_error(error)}"
            f" → {next_move(plan, verdict, cursor)}"
        )
        return verdict

    return classify


def trail_on_route(routes: list[RouteResult[ModelTurnResult]], renderer: LiveRenderer) -> Any:
    def on_route(result: RouteResult[ModelTurnResult]) -> None:
        routes.append(result)
        if result.ok and result.attempts:
            last = result.attempts[-1]
            renderer.note(f"  ✓ {last.candidate.provider}/{last.cursor.model}: answered")

    return on_route


# --- scenario 1: fallback ------------------------------------------------------------------


@attrs.frozen
class FallbackReport:
    answer: str | None
    routes: tuple[tuple[tuple[str, str, str | None], ...], ...]
    tool_answers: tuple[tuple[str, str], ...]
    resets: int
    final_texts: dict[str, str]


async def fallback_scenario(
    out: TextIO, *, live: bool = False, pace: float = FAST_PACE
) -> FallbackReport:
    """Anthropic dies mid-stream, OpenAI answers 429, OpenAI's fallback model succeeds."""
    claude: dict[str, list[FakeResponse]] = {
        "juno-large": [
            StreamResponse(
                [
                    *(TextDelta(t) for t in tokens("Let me work those out in my head: 17 + 25 is")),
                    Pause(pace * 5),
                    Disconnect(),
                ],
                chunk_delay=pace,
            ),
            StreamResponse.of_text(
                *tokens("17 + 25 = 42, and 6 × 7 = 42 as well."), chunk_delay=pace
            ),
        ],
    }
    gpt: dict[str, list[FakeResponse]] = {
        "juno-large": [ErrorResponse(429, "slow down", retry_after=30)],
        "juno-small": [
            StreamResponse.of_tool_calls(
                ("call_add", "add", '{"a": 17, "b": 25}'),
                ("call_mul", "multiply", '{"a": 6, "b": 7}'),
                fragments=3,
                chunk_delay=pace,
            )
        ],
    }
    plan = RoutePlan(
        [
            RouteStage("juno-large", [Candidate("anthropic"), Candidate("openai")]),
            RouteStage("juno-small", [Candidate("openai")]),
        ]
    )
    routes: list[RouteResult[ModelTurnResult]] = []
    renderer = LiveRenderer(out, live=live)
    out.write("Scenario 1: provider fallback with a live text view\n")
    out.write(f"  user: {QUESTION}\n")
    async with (
        open_fake_anthropic_server(claude) as server_a,
        open_fake_openai_server(gpt) as server_b,
        open_anthropic_client(base_url=server_a.base_url, api_key="demo") as client_a,
        open_openai_client(base_url=server_b.base_url, api_key="demo") as client_b,
        anyio.create_task_group() as tg,
    ):
        sink, receive = open_memory_sink()
        tg.start_soon(render, receive, renderer)
        model = RoutedModel(
            plan=plan,
            adapters={
                "anthropic": AnthropicAdapter(
                    client_a, classify=trail_classifier(plan, renderer, classify_anthropic_error)
                ),
                "openai": OpenAIChatAdapter(client_b, classify=trail_classifier(plan, renderer)),
            },
            time_to_first_token=5.0,
            inter_chunk_timeout=5.0,
            on_route=trail_on_route(routes, renderer),
        )
        state = LoopState(messages=[{"role": "user", "content": QUESTION}])
        loop = ToolLoop(
            state=state,
            max_iterations=4,
            call_model=model,
            run_tool_call=make_calculator(renderer, pace),
            build_tools=lambda: TOOLS,
            text_sink=sink,
            run_id="demo",
        )
        result = await loop.run()
        sink.close()  # the reader takes what is left, then render() returns
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


async def cancel_scenario(
    out: TextIO, *, pace: float = FAST_PACE, watch: float = 0.0
) -> CancelReport:
    """Six slow calls, two workers; the run's scope is cancelled while the first two run.

    *watch*: seconds the first two calls visibly run before the cancel lands
    (0: at once, the fast demo's and the tests' choice).
    """
    calls = [(f"call_{i}", "lookup", json.dumps({"key": i})) for i in range(6)]
    started: list[str] = []
    two_running = anyio.Event()

    async def slow_lookup(call: Any) -> ToolCallOutcome:
        started.append(call["id"])
        out.write(f"  ▶ started {call['id']}\n")
        if len(started) == 2:
            two_running.set()
        await anyio.sleep(pace * 50 + watch * 2)  # still running when the cancel lands
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
                    if watch:
                        out.write(
                            f"  … call_0 and call_1 are running, four more are queued; "
                            f"the run's scope is cancelled in {watch:g} s\n"
                        )
                        out.flush()
                    await anyio.sleep(max(pace, watch))
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


class EndpointFailed(Exception):
    """The real endpoint could not answer; the message says which and why, in two lines."""


def explain_failure(error: Exception, base_url: str, model_name: str) -> str:
    where = f"the provider at {base_url} (model {model_name!r})"
    if isinstance(error, RoutingError) and error.attempts:
        record = error.attempts[-1]
        cause = record.error if record.error is not None else error
        verdict = record.outcome.error if isinstance(record.outcome, AttemptFailure) else None
        why = verdict.reason if verdict is not None and verdict.reason else "it failed"
        tries = len(error.attempts)
        again = f" ({tries} attempts)" if tries > 1 else ""
        return f"error: {where} failed: {why}{again}\n  {describe_error(cause)}"
    return f"error: {where} failed\n  {describe_error(error)}"


async def real_endpoint(
    out: TextIO, base_url: str, api_key: str, model_name: str, *, patience: float = 30.0
) -> int:
    renderer = LiveRenderer(out, live=out.isatty())
    routes: list[RouteResult[ModelTurnResult]] = []
    out.write(f"Running the turn against {base_url} ({model_name})\n  user: {QUESTION}\n")
    plan = RoutePlan([RouteStage(model_name, [Candidate("endpoint")])])
    failure: Exception | None = None
    async with (
        open_openai_client(
            base_url=base_url, api_key=api_key, connect_timeout=patience, read_timeout=patience
        ) as client,
        anyio.create_task_group() as tg,
    ):
        sink, receive = open_memory_sink()
        tg.start_soon(render, receive, renderer)
        model = OpenAIChatModel(
            plan=plan,
            clients={"endpoint": client},
            time_to_first_token=patience,
            inter_chunk_timeout=patience,
            classify=trail_classifier(plan, renderer),
            on_route=trail_on_route(routes, renderer),
        )
        state = LoopState(messages=[{"role": "user", "content": QUESTION}])
        loop = ToolLoop(
            state=state,
            max_iterations=4,
            call_model=model,
            run_tool_call=make_calculator(renderer, 0.0),
            build_tools=lambda: TOOLS,
            text_sink=sink,
        )
        try:
            result = await loop.run()
        except Exception as exc:  # reported below, outside the task group: never a group
            failure = exc
        finally:
            sink.close()
    if failure is not None:
        raise EndpointFailed(explain_failure(failure, base_url, model_name)) from failure
    out.write(f"  assistant: {result.content}\n")
    return 0


# --- main -------------------------------------------------------------------------------------


async def demo(out: TextIO, *, live: bool, pace: float = FAST_PACE, watch: float = 0.0) -> int:
    started = time.perf_counter()
    fallback = await fallback_scenario(out, live=live, pace=pace)
    cancel = await cancel_scenario(out, pace=pace, watch=watch)
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


def parser() -> argparse.ArgumentParser:
    described = argparse.ArgumentParser(
        prog="fallback_demo.py",
        description=(
            "Watch provider fallback and cancellation on a built-in fake provider "
            "(127.0.0.1, no API key); or run one turn against a real "
            "OpenAI-compatible endpoint with --base-url, --api-key and --model."
        ),
        epilog=(
            "Exit status: 0 when the demo (or the real turn) succeeds, 1 when it does "
            "not (the reason is printed in one or two lines), 2 for a usage error, "
            "130 after Ctrl-C."
        ),
    )
    described.add_argument(
        "--fast",
        action="store_true",
        help="stream at full speed (about 50 tokens a second) instead of the "
        "watchable default of about 30",
    )
    described.add_argument(
        "--backend",
        choices=("trio", "asyncio"),
        default="trio",
        help="the event loop to run on (default: trio); the demo behaves the same on both",
    )
    real = described.add_argument_group(
        "a real endpoint",
        "Runs the turn against an OpenAI-compatible endpoint instead of the fake "
        "provider. Give --base-url or --model to choose this; the other settings "
        "then default to OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL.",
    )
    real.add_argument(
        "--base-url",
        help="the endpoint's OpenAI-compatible API root, e.g. https://api.openai.com/v1 "
        "(default: $OPENAI_BASE_URL)",
    )
    real.add_argument(
        "--api-key",
        help="the endpoint's API key (default: $OPENAI_API_KEY); the fake provider needs none",
    )
    real.add_argument("--model", help="the model name to ask for (default: $OPENAI_MODEL)")
    real.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait to connect, for the first token, and between chunks (default: 30)",
    )
    return described


def _only_interrupts(error: BaseException) -> bool:
    if isinstance(error, KeyboardInterrupt):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(_only_interrupts(e) for e in error.exceptions)
    return False


async def stop_on_ctrl_c(run: Callable[[], Awaitable[int]]) -> int:
    """Run *run* in a scope that Ctrl-C cancels: the package's own way to stop a run.

    Left to the event loop, Ctrl-C is a KeyboardInterrupt on trio and a bare
    task.cancel() on asyncio; a cancel scope means the same on both, and the
    run's cancellation guarantees then hold however the demo is stopped.
    """
    interrupted = False
    result = 0
    failed: EndpointFailed | None = None
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    interrupted = True
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        try:
            result = await run()
        except EndpointFailed as exc:
            # Raised after the group, as itself: inside it, it would reach main()
            # wrapped in an exception group.
            failed = exc
        tg.cancel_scope.cancel()
    if interrupted:
        raise KeyboardInterrupt
    if failed is not None:
        raise failed
    return result


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    out = sys.stdout
    if args.timeout <= 0:
        cli.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    real = args.base_url is not None or args.model is not None
    if args.api_key is not None and not real:
        cli.error(
            "--api-key is only used with --base-url and --model (a real endpoint); "
            "the built-in fake provider needs no key"
        )
    try:
        if real:
            base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
            api_key = args.api_key or os.environ.get("OPENAI_API_KEY")
            model = args.model or os.environ.get("OPENAI_MODEL")
            missing = [
                flag
                for flag, value in (
                    ("--base-url", base_url),
                    ("--api-key", api_key),
                    ("--model", model),
                )
                if not value
            ]
            if missing:
                cli.error(f"a real endpoint needs {', '.join(missing)} (or the OPENAI_* variables)")
            assert base_url
            assert api_key
            assert model
            run = functools.partial(
                real_endpoint, out, base_url, api_key, model, patience=args.timeout
            )
        else:
            pace, watch = (FAST_PACE, 0.0) if args.fast else (PACE, WATCH)
            run = functools.partial(demo, out, live=out.isatty(), pace=pace, watch=watch)
        return anyio.run(stop_on_ctrl_c, run, backend=args.backend)
    except EndpointFailed as failed:
        out.flush()
        print(failed, file=sys.stderr)
        return 1
    except BaseException as error:
        if not _only_interrupts(error):
            raise
        out.flush()
        print("\ninterrupted (Ctrl-C): the demo stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
