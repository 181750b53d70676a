"""A randomized cancellation soak of ToolLoop: seeded runs, every invariant counted.

Each seed builds one run from a ``random.Random(seed)``: a few model turns,
each asking for a few tool calls, every call with a duration and a way to
end drawn from the catalogue below, hard cancels of every kind the caller
can hold (an anyio scope, a trio scope on trio, a deadline, a task group's
scope, a sibling task that fails) and a soft stop, at random virtual times.
Times are on a quarter-second grid, so a cancel often lands in the same
instant as a tool ending, which is where the bugs live.

Tool endings: return (sometimes suspending, asking for compaction or
activating a plugin), raise, raise ``ToolFailureError``, raise an exception
whose ``__str__`` fails, raise a fatal error, raise a ``BaseException``
subclass, swallow the cancellation (return anyway), turn it into an error,
raise a group holding a failure and the cancellation, finish shielded, run a
shielded cleanup, fan out in its own task group where one part fails, and
(on asyncio) fail with a ``CancelledError`` from a future somebody else
cancelled.

Invariants, each violation counted rather than asserted, so a long soak
reports how many runs broke which rule:

* the transcript is whole: every call of every assistant message answered
  exactly once, right after it;
* every answer is true: never started → ``not_run``; cut off →
  ``interrupted``; ended → its own result;
* nothing starts after a hard cancel (no tool, model call, compaction or
  persist) or a soft stop (no tool or model call);
* no refusal is ever persisted;
* a hard cancel that fired before ``run()`` ended reaches the caller's scope
  and is absorbed there (``run()`` returned nothing);
* one failure reaches the caller as itself, never in a group;
* no task a tool started outlives ``run()``;
* ``RunStats`` counts every answer by kind.

``python tests/loop/soak.py --runs 10000`` (the ``nox -s soak`` session)
prints the count per backend; the default test run plays a few hundred.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import trio

_TESTS = Path(__file__).resolve().parent.parent
for _path in (str(_TESTS), str(_TESTS / "loop")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from loop_scripts import Host, Log, Turn, answers, call, kind_of  # noqa: E402

from conftest import run_on  # noqa: E402
from juno_bind_trio.loop import LoopResult, ToolCallOutcome  # noqa: E402
from juno_bind_trio.plugins import SuspendDirective, ToolFailureError  # noqa: E402
from juno_bind_trio.run import ToolCallLike, tool_call_arguments, tool_call_id  # noqa: E402

ENDINGS = (
    "ok",
    "ok",
    "ok",
    "suspend",
    "compact",
    "plugin",
    "fail",
    "tool_failure",
    "bad_str",
    "fatal",
    "base",
    "swallow_return",
    "swallow_error",
    "group_on_cancel",
    "shield",
    "shield_cleanup",
    "fan_out",
    "stray",
)
HARD_CANCELS = ("none", "anyio_scope", "trio_scope", "deadline", "task_group", "sibling_fails")


class SoakFatal(Exception):
    """What the soak's ``is_fatal_tool_error`` treats as fatal."""


class SoakBase(BaseException):
    """A host's own BaseException subclass raised by a tool."""


class SiblingFailed(Exception):
    """Raised by a task next to the loop, to cancel it through the task group."""


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("unprintable")


@attrs.define
class Tools:
    """The soak's ``run_tool_call``: each call's arguments say how it ends."""

    log: Log
    live: int = 0

    async def __call__(self, tc: ToolCallLike) -> ToolCallOutcome:
        call_id = tool_call_id(tc)
        args: dict[str, Any] = json.loads(tool_call_arguments(tc))
        ending: str = args["ending"]
        delay: float = args["delay"]
        cancelled = anyio.get_cancelled_exc_class()
        self.log.note("start", call_id, anyio.current_time())
        self.live += 1
        try:
            try:
                if ending == "shield":
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(delay)
                elif ending == "fan_out":
                    await self._fan_out(delay)
                else:
                    await anyio.sleep(delay)
            except cancelled as exc:
                if ending == "swallow_return":
                    # Swallowed whole: the tool returns as if nothing happened.
                    self.log.note("end", call_id, anyio.current_time(), "returns")
                    return self._outcome(call_id, args)
                self.log.note("cut", call_id, anyio.current_time())
                if ending == "swallow_error":
                    raise RuntimeError("connection aborted") from None
                if ending == "group_on_cancel":
                    raise BaseExceptionGroup("own group", [ValueError("part"), exc]) from None
                if ending == "shield_cleanup":
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(0.5)
                raise
            except BaseExceptionGroup as group:
                # fan_out: its own task group. A failure alone is the tool's
                # failure; with the cancellation in it, the tool was cut off.
                if group.split(cancelled)[0] is not None:
                    self.log.note("cut", call_id, anyio.current_time())
                else:
                    self.log.note("end", call_id, anyio.current_time(), "raises")
                raise
            raises = ending in ("fail", "tool_failure", "bad_str", "fatal", "base", "stray")
            self.log.note("end", call_id, anyio.current_time(), "raises" if raises else "returns")
            if ending == "stray":
                # asyncio only: a future somebody else cancelled, while nobody
                # cancelled the run.
                future = asyncio.get_running_loop().create_future()
                future.cancel()
                await future
            if ending == "fail":
                raise RuntimeError("boom")
            if ending == "tool_failure":
                raise ToolFailureError("validation", "bad arguments")
            if ending == "bad_str":
                raise BadStr
            if ending == "fatal":
                raise SoakFatal(call_id)
            if ending == "base":
                self.log.note("base", call_id)
                raise SoakBase(call_id)
            return self._outcome(call_id, args)
        finally:
            self.live -= 1

    async def _fan_out(self, delay: float) -> None:
        async def fails() -> None:
            self.live += 1
            try:
                await anyio.sleep(delay)
                raise ValueError("part failed")
            finally:
                self.live -= 1

        async def cleans_up() -> None:
            self.live += 1
            try:
                await anyio.sleep(delay + 1)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.5)
                self.live -= 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(fails)
            tg.start_soon(cleans_up)

    @staticmethod
    def _outcome(call_id: str, args: dict[str, Any]) -> ToolCallOutcome:
        ending = args["ending"]
        return ToolCallOutcome.from_content(
            call_id,
            json.dumps({"ok": call_id}),
            suspend=SuspendDirective(tool_call_id=call_id, reason="ask")
            if ending == "suspend"
            else None,
            request_compaction=ending == "compact",
            activated_plugin="p" if ending == "plugin" else None,
        )


@attrs.define
class Plan:
    turns: list[Turn]
    hard: str
    hard_at: float
    stop_at: float | None
    trio_stop: bool
    per_tool_limit: int
    max_iterations: int
    serial: bool
    compaction: bool
    go_on_once: bool


def _time(rng: random.Random, top: int) -> float:
    return rng.randint(0, top) / 4


def plan(seed: int, backend: str) -> Plan:
    rng = random.Random(seed)
    endings = [e for e in ENDINGS if backend == "asyncio" or e != "stray"]
    turns = []
    for t in range(rng.randint(1, 4)):
        calls = [
            call(
                f"t{t}c{c}",
                rng.choice(["a", "b", "act"]),
                ending=rng.choice(endings),
                delay=_time(rng, 12),
            )
            for c in range(rng.choice([0, 1, 2, 3, 4, 5]))
        ]
        turns.append(Turn(content=rng.choice([None, "text"]), calls=calls, delay=_time(rng, 6)))
    hards = [h for h in HARD_CANCELS if backend == "trio" or h != "trio_scope"]
    return Plan(
        turns=turns,
        hard=rng.choice(hards),
        hard_at=_time(rng, 40),
        stop_at=_time(rng, 40) if rng.random() < 0.4 else None,
        trio_stop=backend == "trio" and rng.random() < 0.5,
        per_tool_limit=rng.randint(1, 3),
        max_iterations=rng.randint(1, 5),
        serial=rng.random() < 0.5,
        compaction=rng.random() < 0.5,
        go_on_once=rng.random() < 0.3,
    )


async def _note_then(log: Log, at: float, note: str, action: Any) -> None:
    await anyio.sleep(at)
    log.note(note, anyio.current_time())
    action()


async def play(seed: int, backend: str) -> list[str]:
    """Play one seeded run; return every invariant it broke (empty when none)."""
    p = plan(seed, backend)
    host = Host(p.turns, save_delay=0.25, compact_delay=0.5)
    log = host.log
    tools = Tools(log)
    stop: Any = None
    if p.stop_at is not None:
        stop = trio.CancelScope() if p.trio_stop else anyio.CancelScope()
    went_on = False

    async def on_turn_would_end(result: Any) -> bool:
        nonlocal went_on
        await anyio.lowlevel.checkpoint()
        if p.go_on_once and not went_on:
            went_on = True
            host.state.messages.append({"role": "user", "content": "go on"})
            return True
        return False

    async def activate(names: tuple[str, ...]) -> None:
        log.note("activate", names, anyio.current_time())
        await anyio.sleep(0.25)

    overrides: dict[str, Any] = {
        "run_tool_call": tools,
        "stop": stop,
        "per_tool_limit": p.per_tool_limit,
        "max_iterations": p.max_iterations,
        "is_fatal_tool_error": lambda e: isinstance(e, SoakFatal),
        "activate_plugins": activate,
        "on_turn_would_end": on_turn_would_end,
    }
    if p.serial:
        overrides["runs_serially"] = lambda c: c["function"]["name"] == "act"
    if p.compaction:
        overrides["apply_compaction"] = host.compact
        overrides["needs_compaction"] = lambda tokens: False
    loop = host.loop(**overrides)

    violations: list[str] = []
    result: LoopResult | None = None
    reached: BaseException | None = None
    returned_at: float | None = None
    live_at_exit = -1
    scope: Any = None
    fuzzy_cancel_at: float | None = None
    try:
        async with anyio.create_task_group() as tg:
            if stop is not None and p.stop_at is not None:
                tg.start_soon(_note_then, log, p.stop_at, "stop", stop.cancel)
            start = anyio.current_time()
            if p.hard == "anyio_scope":
                scope = anyio.CancelScope()
                tg.start_soon(_note_then, log, p.hard_at, "cancel", scope.cancel)
            elif p.hard == "trio_scope":
                scope = trio.CancelScope()
                tg.start_soon(_note_then, log, p.hard_at, "cancel", scope.cancel)
            elif p.hard == "deadline":
                scope = anyio.move_on_after(p.hard_at)
                fuzzy_cancel_at = start + p.hard_at
            elif p.hard == "task_group":
                scope = None
                tg.start_soon(_note_then, log, p.hard_at, "cancel", tg.cancel_scope.cancel)
            elif p.hard == "sibling_fails":

                def fail() -> None:
                    raise SiblingFailed

                fuzzy_cancel_at = start + p.hard_at
                tg.start_soon(_note_then, log, p.hard_at, "sibling", fail)
            try:
                if scope is not None:
                    with scope:
                        try:
                            result = await loop.run()
                        finally:
                            live_at_exit = tools.live
                else:
                    try:
                        result = await loop.run()
                    finally:
                        live_at_exit = tools.live
                returned_at = anyio.current_time()
            except (SoakFatal, SoakBase, BaseExceptionGroup) as exc:
                reached = exc
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The harness's own task group: the sibling's failure, and whatever the
        # loop raised next to it, arrive here together. Take the sibling out.
        rest = group.split(SiblingFailed)[1]
        if rest is not None:
            leaves = rest.exceptions
            if len(leaves) == 1 and isinstance(leaves[0], (SoakFatal, SoakBase)):
                reached = leaves[0]
            else:
                violations.append(f"unexpected exception(s) at the caller: {rest!r}")
    except BaseException as exc:  # a leaked cancellation is a violation to count
        violations.append(f"unexpected exception at the caller: {exc!r}")

    if fuzzy_cancel_at is not None and fuzzy_cancel_at <= (returned_at or anyio.current_time()):
        # A deadline, or a sibling's failure, cancels at an instant rather than
        # at a point in the log: another task may run in that same instant
        # before the cancel is delivered. Note it after everything up to then.
        entries = log.entries
        position = next(
            (i for i, e in enumerate(entries) if _entry_time(e) > fuzzy_cancel_at), len(entries)
        )
        entries.insert(position, ("cancel", fuzzy_cancel_at))

    kinds_seen = log.kinds()
    cancelled_first = "cancel" in kinds_seen

    # The transcript is whole.
    try:
        found = answers(host.state.messages)
    except AssertionError as exc:
        return [*violations, f"transcript not whole: {exc}"]
    kinds = {call_id: kind_of(a) for call_id, a in found.items()}

    # Every answer is true.
    started = {e[1] for e in log.entries if e[0] == "start"}
    cut = {e[1] for e in log.entries if e[0] == "cut"}
    base = {e[1] for e in log.entries if e[0] == "base"}
    ended = {e[1]: e[3] for e in log.entries if e[0] == "end"}
    under_cancel = {e[1] for e in log.after("cancel") if e[0] in ("end", "base")}
    # A tool's BaseException cancels the rest of the pool: whatever raised after it
    # raised under that cancel.
    under_cancel |= {e[1] for e in log.after("base") if e[0] == "end"}
    if fuzzy_cancel_at is not None:
        # Ended in the very instant of a deadline: the loop may see the cancel first.
        under_cancel |= {e[1] for e in log.entries if e[0] == "end" and e[2] == fuzzy_cancel_at}
    for call_id, kind in kinds.items():
        if call_id not in started:
            if kind != "not_run":
                violations.append(f"{call_id} never started but answered {kind}")
        elif call_id in cut:
            if kind != "interrupted":
                violations.append(f"{call_id} was cut off but answered {kind}")
        elif call_id in base or (call_id in under_cancel and ended.get(call_id) == "raises"):
            # A BaseException ended the run from this call, or it raised while the
            # cancel was pending: "effect unknown" is the honest reading.
            if kind in ("ok", "not_run"):
                violations.append(f"{call_id} raised but answered {kind}")
        elif call_id not in ended:
            # Still running when run() left (a sibling's BaseException or a fatal
            # error ended the run while this one ran): it was cut off.
            if kind != "interrupted":
                violations.append(f"{call_id} was left running but answered {kind}")
        elif ended[call_id] == "returns":
            if kind != "ok":
                violations.append(f"{call_id} returned but answered {kind}")
        elif kind in ("not_run", "interrupted", "ok"):
            violations.append(f"{call_id} raised on its own but answered {kind}")

    # Nothing starts after a hard cancel or a soft stop.
    late = [e for e in log.after("cancel") if e[0] in ("start", "model", "save", "compact")]
    if late:
        violations.append(f"started after the cancel: {late}")
    late = [e for e in log.after("stop") if e[0] in ("start", "model")]
    if late:
        violations.append(f"started after the stop: {late}")
    # No refusal persisted.
    if [e for e in log.entries if e[0] == "save" and e[2] != "clean"]:
        violations.append("a refusal was persisted")

    # What reached the caller.
    if isinstance(reached, BaseExceptionGroup):
        if len(_leaves(reached)) < 2 or len(base) < 2:
            violations.append(f"a group reached the caller for one failure: {reached!r}")
    elif isinstance(reached, SoakFatal):
        if ended.get(reached.args[0]) != "raises":
            violations.append(f"fatal error from a call that did not raise it: {reached!r}")
    elif isinstance(reached, SoakBase):
        if reached.args[0] not in base:
            violations.append(f"SoakBase from a call that did not raise it: {reached!r}")
    elif reached is None and not violations:
        if result is not None and cancelled_first and p.hard != "sibling_fails":
            cancel_entry = next(e for e in log.entries if e[0] == "cancel")
            if returned_at is None or cancel_entry[-1] < returned_at:
                violations.append(f"run() returned {result.reason} after the cancel")
        if scope is not None and cancelled_first and result is None and not scope.cancelled_caught:
            violations.append("the cancel did not reach the caller's scope")

    # No task outlives run().
    if live_at_exit not in (-1, 0):
        violations.append(f"{live_at_exit} tool task(s) outlived run()")

    # RunStats count every answer by kind.
    stats = loop.stats
    values = list(kinds.values())
    if stats.tool_calls != len(values):
        violations.append(f"stats.tool_calls {stats.tool_calls} != {len(values)} answers")
    if stats.tool_calls_not_run != values.count("not_run"):
        violations.append("stats.tool_calls_not_run does not match the answers")
    if stats.tool_calls_interrupted != values.count("interrupted"):
        violations.append("stats.tool_calls_interrupted does not match the answers")
    failed = len(values) - values.count("ok") - values.count("not_run")
    if stats.tool_failures != failed - values.count("interrupted"):
        violations.append("stats.tool_failures does not match the answers")
    return violations


def _entry_time(entry: tuple[Any, ...]) -> float:
    """When a log entry happened (entries without a time sort before any)."""
    for value in entry[1:]:
        if isinstance(value, float):
            return value
    return -1.0


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out


def soak(backend: str, seeds: range) -> dict[int, list[str]]:
    """Play every seed on *backend*; return the violations by seed (only seeds that broke one)."""
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
        broken = soak(backend, range(args.first_seed, args.first_seed + args.runs))
        count = sum(len(v) for v in broken.values())
        total += count
        print(f"{backend}: {args.runs} runs, {len(broken)} broke an invariant, {count} violations")
        for seed, found in list(broken.items())[:20]:
            print(f"  seed {seed}: {found}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
