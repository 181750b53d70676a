"""Hypothesis over whole runs: random scripts, failures, stops and cancels, one set of invariants.

Whatever the model asks for, whichever tools fail, however the serial phase
and the pool are mixed, and whenever the soft stop and the hard cancel land:

* the transcript is well formed: every call of every assistant message is
  answered exactly once, by the tool messages right after it;
* every answer tells the truth about its call (ran → its result, cut off →
  ``interrupted``, never started → ``not_run``);
* after a hard cancel nothing starts: no tool, no model call, no compaction,
  no persist; and ``Cancelled`` propagates (``run()`` returns nothing);
* after a soft stop no tool or model call starts, and the run says
  ``"stopped"`` unless it had already answered;
* a refusal is never persisted;
* a fatal tool error propagates as itself;
* the run's stats count every answer by kind.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_scripts import (
    FatalToolError,
    Host,
    Turn,
    assert_answers_match_log,
    assert_nothing_after_cancel,
    call,
    cancel_at,
)

from conftest import run_on
from juno_bind_trio.loop import LoopResult

times = st.integers(min_value=0, max_value=36).map(lambda k: k / 4)

behaviours = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["a", "b", "act"]),
        "delay": st.sampled_from([0, 0.5, 1, 2, 3]),
    },
    optional={
        "fail": st.just("boom"),
        "fatal": st.just(True),
        "suspend": st.just("ask a human"),
        "swallow_cancel": st.just(True),
        "shield": st.just(True),
        "compact": st.just(True),
    },
)


@attrs.frozen
class Scenario:
    turns: list[tuple[float, list[dict[str, Any]], bool]]
    stop_at: float | None
    cancel_at: float | None
    per_tool_limit: int
    max_iterations: int
    serial: bool
    save_delay: float
    compact_above: int | None


scenarios = st.builds(
    Scenario,
    turns=st.lists(
        st.tuples(
            st.sampled_from([0, 0.5, 1, 2]),
            st.lists(behaviours, max_size=6),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    stop_at=st.none() | times,
    cancel_at=st.none() | times,
    per_tool_limit=st.integers(min_value=1, max_value=3),
    max_iterations=st.integers(min_value=1, max_value=5),
    serial=st.booleans(),
    save_delay=st.sampled_from([0, 0.5, 1]),
    compact_above=st.none() | st.sampled_from([0, 20, 40]),
)


async def play(scenario: Scenario) -> None:
    turns = []
    for t, (delay, behaviour_list, says_something) in enumerate(scenario.turns):
        calls = []
        for c, behaviour in enumerate(behaviour_list):
            args = dict(behaviour)
            name = args.pop("name")
            calls.append(call(f"t{t}c{c}", name, **args))
        turns.append(Turn(content="text" if says_something else None, calls=calls, delay=delay))
    host = Host(turns, save_delay=scenario.save_delay, compact_delay=0.5)
    stop = anyio.CancelScope() if scenario.stop_at is not None else None
    overrides: dict[str, Any] = {
        "stop": stop,
        "per_tool_limit": scenario.per_tool_limit,
        "max_iterations": scenario.max_iterations,
        "is_fatal_tool_error": lambda e: isinstance(e, FatalToolError),
        "apply_compaction": host.compact,
    }
    if scenario.serial:
        overrides["runs_serially"] = lambda c: c["function"]["name"] == "act"
    if scenario.compact_above is not None:
        above = scenario.compact_above
        overrides["needs_compaction"] = lambda tokens: tokens > above
    loop = host.loop(**overrides)

    scope = anyio.CancelScope()
    result: LoopResult | None = None
    fatal: FatalToolError | None = None
    async with anyio.create_task_group() as tg:
        if stop is not None and scenario.stop_at is not None:
            tg.start_soon(cancel_at, stop, scenario.stop_at, host.log, "stop")
        if scenario.cancel_at is not None:
            tg.start_soon(cancel_at, scope, scenario.cancel_at, host.log, "cancel")
        with scope:
            try:
                result = await loop.run()
            except FatalToolError as exc:
                fatal = exc
        tg.cancel_scope.cancel()

    kinds_seen = host.log.kinds()
    # The transcript, and the truth of every answer.
    kinds = assert_answers_match_log(host.state.messages, host.log)
    # Hard cancel: Cancelled propagated, nothing started after it.
    assert_nothing_after_cancel(host.log)
    if scope.cancelled_caught:
        assert "cancel" in kinds_seen
        assert result is None
        assert fatal is None
    # Fatal errors: as themselves, and only from a call that really raised one.
    if fatal is not None:
        assert type(fatal) is FatalToolError
        failing = fatal.args[0].removeprefix("fatal in ")
        assert ("end", failing) in [(e[0], e[1]) for e in host.log.entries]
        assert kinds[failing] == "failed"
    # Soft stop.
    after_stop = host.log.after("stop")
    assert [e for e in after_stop if e[0] in ("start", "model", "compact")] == []
    if result is not None:
        if "stop" in kinds_seen:
            assert result.reason in ("stopped", "completed")
        if result.reason == "stopped":
            assert "stop" in kinds_seen
        if result.reason == "suspended":
            assert result.suspensions
        assert result.iterations <= scenario.max_iterations
    # A refusal is never persisted: a resumed run would read "failed" for work never done.
    assert [e for e in host.log.entries if e[0] == "save" and e[2] != "clean"] == []
    # Stats count every answer by kind.
    stats = loop.stats
    values = list(kinds.values())
    assert stats.tool_calls == len(values)
    assert stats.tool_calls_not_run == values.count("not_run")
    assert stats.tool_calls_interrupted == values.count("interrupted")
    assert stats.tool_failures == values.count("failed")
    assert stats.model_calls == kinds_seen.count("model")
    assert stats.compactions <= kinds_seen.count("compact")


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
def test_every_run_keeps_the_invariants(backend: str, scenario: Scenario) -> None:
    run_on(backend, play, scenario)
