"""A randomized soak of ``Agent.run`` / ``Agent.open_run``: seeded runs, every invariant counted.

Each seed builds one run from a ``random.Random(seed)``, as the loop's soak
(``tests/loop/soak.py``) does for the kernel, but through the layer a
developer writes against: an ``Agent`` with typed tools (async, serial and
synchronous ones), a scripted model that streams text and sometimes retries
an attempt, structured output with answers the model must be re-asked for,
usage limits, and every way a caller ends a run early: the reader raising,
``break``, ``run.cancel()``, ``run.stop()``, a cancel scope or a deadline
around the run, a soft ``stop=``.

Tool endings: return, raise, raise ``ToolFailureError``, raise a
``BaseException`` subclass, raise an ``ExceptionGroup`` of two failures,
raise a ``BaseExceptionGroup`` holding a ``BaseException``, swallow the
cancellation and return, turn it into an error, finish shielded, and, for a
synchronous tool in a worker thread, return, raise, or run on until a cancel
fires around it; arguments that do not validate, and a call to no tool.

Invariants, each violation counted:

* the transcript is whole: every call answered exactly once, right after it;
* every answer is true: never started → ``not_run`` (or the validation /
  not-found failure of a call that never could start); cut off →
  ``interrupted``; returned → its own result; raised → a failure;
* nothing starts after a hard cancel (no async tool, no model request) or a
  soft stop (no tool claimed, no model request, re-asks included);
* one failure reaches the caller as itself, never in a group, and a cancel
  reaches the scope that was cancelled;
* the reader's events are true: one ``RunEndedEvent``, last; each call ends
  once, starts at most once and only before it ends, and only when it ran;
  a turn's text never arrives after its ``TurnEndedEvent``;
* ``stats.model_calls`` is the number of requests the model saw, and no
  request passes ``request_limit``.

``python tests/agent/soak_agent.py --runs 10000`` (part of ``nox -s soak``)
prints the count per backend; the default test run plays a seeded sample.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import attrs
import pydantic

_TESTS = Path(__file__).resolve().parent.parent
for _path in (str(_TESTS), str(_TESTS / "agent")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from conftest import run_on  # noqa: E402
from juno_bind_trio import StructuredOutputError, UsageLimitExceeded  # noqa: E402
from juno_bind_trio.agent import (  # noqa: E402
    Agent,
    AgentEvent,
    ResetEvent,
    RunEndedEvent,
    TextEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
    UsageLimits,
    tool,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult  # noqa: E402
from juno_bind_trio.plugins import ToolFailureError  # noqa: E402
from juno_bind_trio.transcript import heal_transcript  # noqa: E402

ASYNC_ENDINGS = (
    "ok",
    "ok",
    "ok",
    "fail",
    "tool_failure",
    "base",
    "group",
    "base_group",
    "swallow_return",
    "swallow_error",
    "shield",
)
SYNC_ENDINGS = ("sync_ok", "sync_fail", "sync_until_cancel")
CALL_SHAPES = ("bad_args", "unknown")
READERS = ("all", "all", "break", "raise", "cancel", "stop")
HARD = ("none", "none", "scope", "deadline")
LIMITS = ("none", "none", "none", "requests", "tool_calls", "tokens")
# A synchronous tool that waits for a cancel gives up after this much real time.
SYNC_WAIT = 0.02


class SoakBase(BaseException):
    """A host's own BaseException subclass, raised by a tool."""


class ReaderError(Exception):
    """What the soak's reader raises inside the ``async with`` block."""


class Out(pydantic.BaseModel):
    n: int


@attrs.define
class Log:
    """Everything that happened, in order (appended from worker threads too)."""

    entries: list[tuple[Any, ...]] = attrs.field(factory=list)

    def note(self, *entry: Any) -> None:
        self.entries.append(entry)

    def index(self, kind: str) -> int | None:
        for i, entry in enumerate(self.entries):
            if entry[0] == kind:
                return i
        return None

    def after(self, kind: str) -> list[tuple[Any, ...]]:
        at = self.index(kind)
        return [] if at is None else self.entries[at + 1 :]


@attrs.define
class Turn:
    calls: list[dict[str, Any]]
    content: str | None
    delay: float
    chunks: list[str]
    retried: bool  # an earlier attempt streamed text and failed
    invalid: int  # answers that do not match the output type before the good one


@attrs.define
class Plan:
    turns: list[Turn]
    structured: bool
    max_output_retries: int
    per_tool_limit: int
    max_iterations: int
    mode: str  # "run" or "open_run"
    reader: str
    reader_after: int
    hard: str
    hard_at: float
    stop_at: float | None
    limit: str
    limit_value: int


def _time(rng: random.Random, top: int) -> float:
    return rng.randint(0, top) / 4


def _call(rng: random.Random, call_id: str) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.06:
        shape = rng.choice(CALL_SHAPES)
        name = "nope" if shape == "unknown" else "work"
        arguments = json.dumps({"call_id": call_id, "ending": 5, "delay": "soon"})
    elif roll < 0.25:
        name, ending = "sync_work", rng.choice(SYNC_ENDINGS)
        arguments = json.dumps({"call_id": call_id, "ending": ending})
    else:
        name = "act" if rng.random() < 0.2 else "work"
        ending = rng.choice(ASYNC_ENDINGS)
        arguments = json.dumps({"call_id": call_id, "ending": ending, "delay": _time(rng, 12)})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def plan(seed: int) -> Plan:
    rng = random.Random(seed)
    structured = rng.random() < 0.35
    turns: list[Turn] = []
    for t in range(rng.randint(0, 3)):
        calls = [_call(rng, f"t{t}c{c}") for c in range(rng.randint(1, 4))]
        turns.append(
            Turn(
                calls=calls,
                content=rng.choice([None, f"working {t}"]),
                delay=_time(rng, 6),
                chunks=["work", f"ing {t}"] if rng.random() < 0.5 else [],
                retried=rng.random() < 0.2,
                invalid=0,
            )
        )
    turns.append(
        Turn(
            calls=[],
            content='{"n": 1}' if structured else "the answer",
            delay=_time(rng, 6),
            chunks=["the ", "answer"] if rng.random() < 0.5 else [],
            retried=rng.random() < 0.2,
            invalid=rng.choice([0, 0, 1, 2, 3]) if structured else 0,
        )
    )
    limit = rng.choice(LIMITS)
    return Plan(
        turns=turns,
        structured=structured,
        max_output_retries=rng.randint(0, 2),
        per_tool_limit=rng.randint(1, 3),
        max_iterations=rng.randint(1, 5),
        mode=rng.choice(["run", "open_run", "open_run"]),
        reader=rng.choice(READERS),
        reader_after=rng.randint(0, 12),
        hard=rng.choice(HARD),
        hard_at=_time(rng, 30),
        stop_at=_time(rng, 30) if rng.random() < 0.3 else None,
        limit=limit,
        limit_value=rng.randint(0, 4) if limit != "tokens" else rng.randint(10, 80),
    )


def build_agent(p: Plan, log: Log, live: list[int]) -> Agent[None, Any]:
    cancelled = anyio.get_cancelled_exc_class()

    async def work(call_id: str, ending: str, delay: float) -> str:
        log.note("start", call_id, anyio.current_time())
        live[0] += 1
        try:
            try:
                if ending == "shield":
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(delay)
                else:
                    await anyio.sleep(delay)
            except cancelled:
                if ending == "swallow_return":
                    log.note("end", call_id, anyio.current_time(), "returns")
                    return f"ok:{call_id}"
                log.note("cut", call_id, anyio.current_time())
                if ending == "swallow_error":
                    raise RuntimeError("connection aborted") from None
                raise
            raises = ending in ("fail", "tool_failure", "base", "group", "base_group")
            log.note("end", call_id, anyio.current_time(), "raises" if raises else "returns")
            if ending == "fail":
                raise RuntimeError("boom")
            if ending == "tool_failure":
                raise ToolFailureError("conflict", "try later")
            if ending == "base":
                log.note("base", call_id)
                raise SoakBase(call_id)
            if ending == "group":
                raise ExceptionGroup("two parts", [ValueError("a"), KeyError("b")])
            if ending == "base_group":
                log.note("base", call_id)
                raise BaseExceptionGroup("own", [SoakBase(call_id), ValueError("part")])
            return f"ok:{call_id}"
        finally:
            live[0] -= 1

    def sync_work(call_id: str, ending: str) -> str:
        log.note("start", call_id, None, "sync")
        if ending == "sync_until_cancel":
            deadline = time.monotonic() + SYNC_WAIT
            while time.monotonic() < deadline:
                try:
                    anyio.from_thread.check_cancelled()
                except BaseException:
                    break
                time.sleep(0.001)
        raises = ending == "sync_fail"
        log.note("end", call_id, None, "raises" if raises else "returns", "sync")
        if raises:
            raise RuntimeError("sync boom")
        return f"ok:{call_id}"

    tools = [
        tool(work),
        tool(work, name="act", serial=True),
        tool(sync_work),
    ]
    left = {id(turn): turn.invalid for turn in p.turns}
    script = list(p.turns)
    seen: list[int] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(1)
        log.note("model", turn.iteration, anyio.current_time())
        if not LIVE_MESSAGES:
            LIVE_MESSAGES.append(turn.messages)
        if turn.iteration > len(script):
            return ModelTurnResult(content=script[-1].content, input_tokens=10, output_tokens=5)
        say = script[turn.iteration - 1]
        stream = turn.text_stream
        if stream is not None:
            stream.begin_attempt()
            if say.retried:
                stream.observe("lost text")
                await anyio.sleep(0.25)
                stream.begin_attempt()
        await anyio.sleep(say.delay)
        if stream is not None:
            for chunk in say.chunks:
                stream.observe(chunk)
                await anyio.sleep(0.25)
        content = say.content
        if not say.calls and left[id(say)] > 0:
            left[id(say)] -= 1
            content = '{"n": "not a number"}'
        return ModelTurnResult(
            content=content, tool_calls=say.calls, input_tokens=10, output_tokens=5
        )

    limits: UsageLimits | None = None
    if p.limit == "requests":
        limits = UsageLimits(request_limit=p.limit_value)
    elif p.limit == "tool_calls":
        limits = UsageLimits(tool_calls_limit=p.limit_value)
    elif p.limit == "tokens":
        limits = UsageLimits(total_tokens_limit=p.limit_value)
    return Agent(
        model,
        tools=tools,
        output_type=Out if p.structured else str,
        max_output_retries=p.max_output_retries,
        per_tool_limit=p.per_tool_limit,
        max_iterations=p.max_iterations,
        usage_limits=limits,
    )


LIVE_MESSAGES: list[list[dict[str, Any]]] = []


def _kind(answer: str) -> str:
    if answer.startswith("ok:"):
        return "ok"
    try:
        envelope = json.loads(answer)
    except ValueError:
        return "garbage"
    kind = envelope.get("kind") if isinstance(envelope, dict) else None
    return kind or "failed"


async def play(seed: int, backend: str) -> list[str]:
    """Play one seeded run; return every invariant it broke (empty when none)."""
    p = plan(seed)
    log = Log()
    live = [0]
    LIVE_MESSAGES.clear()
    agent = build_agent(p, log, live)
    violations: list[str] = []
    stop: Any = anyio.CancelScope() if p.stop_at is not None else None
    events: list[AgentEvent] = []
    reached: BaseException | None = None
    result: Any = None
    read_to_the_end = False
    scope: Any = None
    deadline_at: float | None = None

    async def later(at: float, note: str, action: Any) -> None:
        await anyio.sleep(at)
        log.note(note, anyio.current_time())
        action()

    async def drive() -> None:
        nonlocal result, read_to_the_end
        if p.mode == "run":
            result = await agent.run("go", stop=stop)
            return
        async with agent.open_run("go", stop=stop) as run:
            async for event in run:
                events.append(event)
                if len(events) <= p.reader_after or p.reader == "all":
                    continue
                if p.reader == "break":
                    log.note("cancel", anyio.current_time(), "break")
                    break
                if p.reader == "raise":
                    log.note("cancel", anyio.current_time(), "raise")
                    raise ReaderError(seed)
                if p.reader == "cancel" and not any(e[0] == "cancel" for e in log.entries):
                    log.note("cancel", anyio.current_time(), "run.cancel")
                    run.cancel()
                if p.reader == "stop" and not any(e[0] == "stop" for e in log.entries):
                    log.note("stop", anyio.current_time(), "run.stop")
                    run.stop()
            else:
                read_to_the_end = True
        result = run.result

    start = anyio.current_time()
    try:
        async with anyio.create_task_group() as tg:
            if stop is not None and p.stop_at is not None:
                tg.start_soon(later, p.stop_at, "stop", stop.cancel)
            if p.hard == "scope":
                scope = anyio.CancelScope()
                tg.start_soon(later, p.hard_at, "cancel", scope.cancel)
            elif p.hard == "deadline":
                scope = anyio.move_on_after(p.hard_at)
                deadline_at = start + p.hard_at
            try:
                if scope is not None:
                    with scope:
                        await drive()
                else:
                    await drive()
            except (
                SoakBase,
                ReaderError,
                StructuredOutputError,
                UsageLimitExceeded,
                BaseExceptionGroup,
            ) as exc:
                reached = exc
            tg.cancel_scope.cancel()
    except BaseException as exc:  # a leaked cancellation, anything unexpected
        violations.append(f"unexpected exception at the caller: {exc!r}")
    ended_at = anyio.current_time()
    if live[0] != 0:
        violations.append(f"{live[0]} tool(s) still running after the run")

    if deadline_at is not None and deadline_at <= ended_at:
        # A deadline cancels at an instant, not at a point in the log: note it
        # after everything that happened before that instant.
        entries = log.entries
        position = next(
            (
                i
                for i, e in enumerate(entries)
                if isinstance(e[-1] if len(e) > 2 else None, float) and e[2] > deadline_at
            ),
            len(entries),
        )
        entries.insert(position, ("cancel", deadline_at, "deadline"))
    if isinstance(reached, UsageLimitExceeded):
        result = reached.result

    # --- the transcript is whole --------------------------------------------------------
    messages: list[dict[str, Any]] = (
        result.messages if result is not None else (LIVE_MESSAGES[0] if LIVE_MESSAGES else [])
    )
    if heal_transcript(messages).changed:
        return [*violations, "the transcript is not whole"]
    calls: dict[str, dict[str, Any]] = {}
    answers: dict[str, str] = {}
    for message in messages:
        for made in message.get("tool_calls") or ():
            calls[made["id"]] = made
        if message.get("role") == "tool":
            if message["tool_call_id"] in answers:
                violations.append(f"{message['tool_call_id']} answered twice")
            answers[message["tool_call_id"]] = message["content"]
    if set(calls) != set(answers):
        violations.append(f"calls {sorted(calls)} but answers {sorted(answers)}")

    # --- every answer is true -----------------------------------------------------------
    started = {e[1] for e in log.entries if e[0] == "start"}
    cut = {e[1] for e in log.entries if e[0] == "cut"}
    base = {e[1] for e in log.entries if e[0] == "base"}
    ended = {e[1]: e[3] for e in log.entries if e[0] == "end"}
    cancel_at = log.index("cancel")
    raised_late = {
        e[1]
        for i, e in enumerate(log.entries)
        if e[0] == "end" and e[3] == "raises" and cancel_at is not None and i > cancel_at
    }
    raised_late |= {e[1] for e in log.after("base") if e[0] == "end" and e[3] == "raises"}
    if cancel_at is not None or deadline_at is not None or base:
        # A worker thread's end is noted in the thread, so its place in the log
        # says nothing of when the run saw it: one that raised with a cancel in
        # the run may have raised under it.
        raised_late |= {
            e[1] for e in log.entries if e[0] == "end" and e[3] == "raises" and len(e) > 4
        }
    if deadline_at is not None:
        raised_late |= {
            e[1] for e in log.entries if e[0] == "end" and e[3] == "raises" and e[2] == deadline_at
        }
    kinds = {call_id: _kind(answer) for call_id, answer in answers.items()}
    for call_id, kind in kinds.items():
        arguments = json.loads(calls[call_id]["function"]["arguments"])
        if arguments.get("ending") == 5:  # bad arguments, or a tool that does not exist
            if kind not in ("validation", "not_found", "not_run"):
                violations.append(f"{call_id} could not start but answered {kind}")
        elif call_id not in started:
            if kind != "not_run":
                violations.append(f"{call_id} never started but answered {kind}")
        elif call_id in cut:
            if kind != "interrupted":
                violations.append(f"{call_id} was cut off but answered {kind}")
        elif call_id in base or call_id in raised_late:
            if kind in ("ok", "not_run"):
                violations.append(f"{call_id} raised but answered {kind}")
        elif call_id not in ended:
            if kind != "interrupted":
                violations.append(f"{call_id} was left running but answered {kind}")
        elif ended[call_id] == "returns":
            if kind != "ok" or answers[call_id] != f"ok:{call_id}":
                violations.append(f"{call_id} returned but answered {kind}")
        elif kind in ("ok", "not_run", "interrupted"):
            violations.append(f"{call_id} raised on its own but answered {kind}")

    # --- nothing starts after a hard cancel or a soft stop -------------------------------
    late = [
        e
        for e in log.after("cancel")
        if (e[0] == "start" and len(e) < 4) or e[0] == "model"  # a thread may be on its way
    ]
    if late:
        violations.append(f"started after the cancel: {late}")
    late = [e for e in log.after("stop") if e[0] == "model"]
    if late:
        violations.append(f"a model request after the stop: {late}")
    late = [e for e in log.after("stop") if e[0] == "start" and len(e) < 4]
    if late:
        violations.append(f"a tool claimed after the stop: {late}")

    # --- what reached the caller --------------------------------------------------------
    if isinstance(reached, BaseExceptionGroup):
        leaves = reached.exceptions
        own = reached.message == "own" and any(
            isinstance(leaf, SoakBase) and leaf.args[0] in base for leaf in leaves
        )
        two = (
            len(leaves) == 2
            and any(isinstance(leaf, ReaderError) for leaf in leaves)
            and any(isinstance(leaf, SoakBase | BaseExceptionGroup) for leaf in leaves)
        )
        several = len(base) >= 2 and len(leaves) >= 2  # two tools' BaseExceptions at once
        if not own and not two and not several:
            # A tool's own group leaves as it was raised; the reader's failure and
            # the run's at once stay together; anything else is one failure wrapped.
            violations.append(f"a group reached the caller: {reached!r}")
    elif isinstance(reached, SoakBase):
        if reached.args[0] not in base:
            violations.append(f"SoakBase from a call that did not raise it: {reached!r}")
    elif isinstance(reached, ReaderError):
        if p.reader != "raise":
            violations.append("a ReaderError without a reader that raises")
    elif isinstance(reached, StructuredOutputError):
        if not p.structured:
            violations.append("StructuredOutputError from a text agent")
    elif reached is None and scope is not None and result is None and not violations:
        cancel_entry = log.index("cancel")
        by_scope = cancel_entry is not None and log.entries[cancel_entry][-1] in (
            "deadline",
            anyio.current_time(),
        )
        if by_scope and p.mode == "run" and not scope.cancelled_caught:
            violations.append("the cancel did not reach the caller's scope")

    # --- the reader's events are true ---------------------------------------------------
    if p.mode == "open_run" and read_to_the_end:
        if not events or not isinstance(events[-1], RunEndedEvent):
            violations.append("the events do not end with RunEndedEvent")
        if sum(isinstance(e, RunEndedEvent) for e in events) != 1:
            violations.append("RunEndedEvent more than once")
        starts: dict[str, int] = {}
        ends: dict[str, ToolCallEndedEvent] = {}
        turn_over: set[str] = set()
        for position, event in enumerate(events):
            if isinstance(event, ToolCallStartedEvent):
                if event.tool_call_id in starts or event.tool_call_id in ends:
                    violations.append(f"{event.tool_call_id} started twice or after it ended")
                starts[event.tool_call_id] = position
            elif isinstance(event, ToolCallEndedEvent):
                if event.tool_call_id in ends:
                    violations.append(f"{event.tool_call_id} ended twice")
                ends[event.tool_call_id] = event
            elif isinstance(event, TurnEndedEvent):
                turn_over.add(event.turn_id)
            elif isinstance(event, TextEvent | ResetEvent) and event.turn_id in turn_over:
                violations.append(f"{type(event).__name__} after its turn {event.turn_id} ended")
        for call_id, ended_event in ends.items():
            answered = kinds.get(call_id, "")
            expected = {
                "ok": "finished",
                "not_run": "not_run",
                "interrupted": "interrupted",
            }.get(answered, "failed")
            if ended_event.status != expected:
                violations.append(f"{call_id} ended {ended_event.status} but answered {answered}")
            if ended_event.status == "finished" and call_id not in starts:
                violations.append(f"{call_id} finished without starting")
            if call_id in starts and call_id not in started and answered != "not_run":
                violations.append(f"{call_id} reported started but never ran")
        if set(ends) != set(answers):
            violations.append(f"ended events for {sorted(ends)}, answers for {sorted(answers)}")

    # --- requests are counted and bounded ----------------------------------------------
    requests = sum(1 for e in log.entries if e[0] == "model")
    if result is not None and result.stats.model_calls != requests:
        violations.append(f"stats.model_calls {result.stats.model_calls} for {requests} requests")
    if p.limit == "requests" and requests > p.limit_value:
        violations.append(f"{requests} requests past request_limit {p.limit_value}")
    return violations


def soak(backend: str, seeds: range) -> dict[int, list[str]]:
    """Play every seed on *backend*; return the violations by seed (only seeds that broke one)."""
    # Every failed tool call is logged at WARNING; thousands of them say nothing here.
    logging.getLogger("juno_bind_trio").addHandler(logging.NullHandler())
    logging.getLogger("juno_bind_trio").propagate = False
    broken: dict[int, list[str]] = {}
    for seed in seeds:
        found = run_on(backend, play, seed, backend)
        if found:
            broken[seed] = found
    return broken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs per backend")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--backend", choices=("trio", "asyncio", "all"), default="all")
    args = parser.parse_args()
    backends = ("trio", "asyncio") if args.backend == "all" else (args.backend,)
    total = 0
    for backend in backends:
        began = time.monotonic()
        broken = soak(backend, range(args.first_seed, args.first_seed + args.runs))
        count = sum(len(v) for v in broken.values())
        total += count
        print(
            f"{backend}: {args.runs} runs, {len(broken)} broke an invariant, {count} violations "
            f"({time.monotonic() - began:.0f} s)"
        )
        for seed, found in list(broken.items())[:20]:
            print(f"  seed {seed}: {found}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
