"""A property: whatever mix of approvals, denials, external answers and crashes a run meets,
every call is answered exactly once and truthfully, and a provider accepts the transcript.

The decisions of each round arrive by one of the two roads a store-backed host has:
``agent.resume(run_id, ...)``, or ``agent.run(conversation=..., ...)`` (the run is a
conversation's, and that road resumes it); after every round the store's
``list_waiting`` lists the run exactly when a call of it still waits."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import Deny, ExternalTool, SimulatedCrash
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.testing import CrashingStore, run_until_crash

from .durable_world import call, check_history, provider_accepts
from .store_helpers import FakeClock, postgres_dsn

KINDS = ("approval", "external", "plain")
Decision = tuple[str, Any]  # ("approve", None) | ("deny", reason) | ("result", v) | ("error", t)


def decisions_for(kind: str) -> st.SearchStrategy[Decision]:
    if kind == "approval":
        return st.one_of(
            st.just(("approve", None)),
            st.sampled_from(["over the limit", "no"]).map(lambda r: ("deny", r)),
        )
    return st.one_of(
        st.one_of(st.integers(-5, 5), st.text("abc", max_size=3), st.none()).map(
            lambda v: ("result", v)
        ),
        st.sampled_from(["closed", "timeout"]).map(lambda t: ("error", t)),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[str], list[tuple[dict[int, Decision], Any]]]:
    """The calls' kinds; each round's decisions and crash (and road: see ``play``)."""
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=4))
    waiting = [i for i, k in enumerate(kinds) if k != "plain"]
    rounds: list[tuple[dict[int, Decision], Any]] = []
    for _ in range(draw(st.integers(0, 3))):
        chosen = draw(st.lists(st.sampled_from(waiting), unique=True)) if waiting else []
        decided = {i: draw(decisions_for(kinds[i])) for i in chosen}
        crash = draw(
            st.one_of(
                st.none(),
                st.tuples(
                    st.sampled_from(
                        ["after_calls_started", "after_results", "before_save", "in_tool"]
                    ),
                    st.integers(1, 2),
                ),
            )
        )
        road = draw(st.sampled_from(["resume", "conversation"]))
        rounds.append((decided, (crash, road)))
    return kinds, rounds


class World:
    def __init__(self, kinds: list[str]) -> None:
        self.kinds = kinds
        self.effects: Counter[str] = Counter()
        # "in_tool": the process dies inside an approved call, after its effect.
        self.dies_in_tool: CrashingStore | None = None

        async def model(turn: ModelTurn) -> ModelTurnResult:
            if not any(m.get("role") == "assistant" for m in turn.messages):
                return ModelTurnResult(
                    tool_calls=tuple(call(f"c{i}", f"{k}_tool", n=i) for i, k in enumerate(kinds))
                )
            return ModelTurnResult(content="done")

        @tool(requires_approval=True)
        async def approval_tool(n: int) -> str:
            """Needs an approval."""
            self.effects[f"c{n}"] += 1
            if self.dies_in_tool is not None:
                self.dies_in_tool.crashed = True  # nothing more reaches the store
                raise SimulatedCrash(f"the process died inside c{n}")
            return f"did c{n}"

        @tool(repeatable=False)
        async def plain_tool(n: int) -> str:
            """Runs at once."""
            self.effects[f"c{n}"] += 1
            return f"did c{n}"

        self.model = model
        self.tools = [approval_tool, plain_tool, ExternalTool("external_tool", {"type": "object"})]

    def agent(self, store: RunStore) -> Agent[None, str]:
        return Agent(self.model, tools=self.tools, store=store, store_owner="w1")


async def resume(
    agent: Agent[None, str], decided: dict[int, Decision], road: str = "resume"
) -> None:
    approvals, results, errors = keywords(decided)
    if road == "conversation" and decided:
        done = await agent.run(
            conversation="t", approvals=approvals, results=results, errors=errors
        )
        assert done.run_id == "r1"  # the stored run went on, not a copy of it
        return
    await agent.resume("r1", approvals=approvals, results=results, errors=errors)


def keywords(
    decided: dict[int, Decision],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    approvals: dict[str, Any] = {}
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for index, (what, value) in decided.items():
        call_id = f"c{index}"
        if what == "approve":
            approvals[call_id] = True
        elif what == "deny":
            approvals[call_id] = Deny(value)
        elif what == "result":
            results[call_id] = value
        else:
            errors[call_id] = value
    return approvals, results, errors


async def play(
    store: RunStore, kinds: list[str], rounds: list[tuple[dict[int, Decision], Any]]
) -> None:
    world = World(kinds)
    first = await world.agent(store).run("go", run_id="r1", conversation="t")
    waiting = {i for i, k in enumerate(kinds) if k != "plain"}
    assert first.reason == ("suspended" if waiting else "completed")
    decided: dict[int, Decision] = {}
    crashed_while: set[int] = set()  # approved calls whose resume crashed
    for given_decisions, (crash, road) in rounds:
        if (await store.get_run("r1")).status == "completed":
            break
        fresh = {i: d for i, d in given_decisions.items() if i not in decided}
        target: RunStore = store
        if crash is not None:
            in_tool = crash[0] == "in_tool"
            target = CrashingStore(
                store, "after_results" if in_tool else crash[0], 99 if in_tool else crash[1]
            )
            world.dies_in_tool = target if in_tool else None
        agent = world.agent(target)
        if await run_until_crash(lambda: resume(agent, fresh, road)):  # noqa: B023
            crashed_while |= {
                i for i, (what, _) in {**decided, **fresh}.items() if what == "approve"
            }
        decided.update(fresh)
        world.dies_in_tool = None
        # The store is truthful: the run is listed as waiting exactly while a call waits.
        still = await store.pending_calls("r1")
        listed = [r.run_id for r in await store.list_waiting()]
        assert listed == (["r1"] if still else []), (listed, still)
        if (await store.get_run("r1")).status == "suspended":
            assert still
    # The rest decided, then plain resumes until the run ends.
    rest = {i: ("approve", None) if kinds[i] == "approval" else ("result", "late") for i in waiting}
    rest = {i: d for i, d in rest.items() if i not in decided}
    status = (await store.get_run("r1")).status
    if rest:
        await resume(world.agent(store), rest)
        decided.update(rest)
    elif status != "completed":
        await world.agent(store).resume("r1")
    loaded = await store.load("r1")
    assert loaded.record.status == "completed"
    assert await store.pending_calls("r1") == []
    assert await store.list_waiting() == []
    messages = loaded.messages
    assert await store.conversation_messages("t") == messages
    assert [r.run_id for r in await store.list_runs()] == ["r1"]
    check_history(messages)
    await provider_accepts(messages)
    answers = {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
    assert sorted(answers) == sorted(f"c{i}" for i in range(len(kinds)))
    for index, kind in enumerate(kinds):
        call_id = f"c{index}"
        text = answers[call_id]
        ran = world.effects[call_id]
        assert ran <= 1, (call_id, ran)  # never twice, whatever crashed
        if kind == "plain":
            assert (text, ran) == (f"did {call_id}", 1)
            continue
        what, value = decided[index]
        if what == "approve":
            if text == f"did {call_id}":
                assert ran == 1
            else:  # cut off by a crash: said so, not run again
                assert index in crashed_while
                assert json.loads(text)["kind"] == "interrupted"
        elif what == "deny":
            body = json.loads(text)
            assert (body["kind"], ran) == ("authz", 0)
            assert value in body["error"]
        elif what == "result":
            assert ran == 0
            assert text == (value if isinstance(value, str) else json.dumps(value))
        else:
            assert json.loads(text) == {"success": False, "kind": "external", "error": value}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
# The cases that matter most, always: the process dies inside an approved call, after
# its effect; a crash right after the receipt; a mix decided over several resumes.
@example(scenario=(["approval"], [({0: ("approve", None)}, (("in_tool", 1), "resume"))]))
@example(scenario=(["approval"], [({0: ("approve", None)}, (("in_tool", 1), "conversation"))]))
@example(
    scenario=(
        ["approval", "plain"],
        [({0: ("approve", None)}, (("after_calls_started", 1), "resume"))],
    )
)
@example(
    scenario=(
        ["approval", "external", "approval"],
        [
            ({1: ("result", 3)}, (None, "conversation")),
            ({0: ("deny", "no")}, (("before_save", 1), "conversation")),
            ({}, (None, "resume")),
        ],
    )
)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_every_call_is_answered_once_and_truthfully(
    kind: str, backend: str, scenario: tuple[list[str], list[tuple[dict[int, Decision], Any]]]
) -> None:
    kinds, rounds = scenario
    dsn = postgres_dsn() if kind == "postgres" else None  # emptied for each example

    async def main(directory: str) -> None:
        clock = FakeClock()
        store: RunStore = (
            SqliteRunStore(Path(directory) / "runs.db", clock=clock)
            if dsn is None
            else PostgresRunStore(dsn, clock=clock)
        )
        async with store:
            await play(store, kinds, rounds)

    with tempfile.TemporaryDirectory() as directory:
        run_on(backend, main, directory)
