"""Sub-agent lineage, admission and the poll schedule."""

from __future__ import annotations

import itertools
import json
import math

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio.run import (
    ChainLink,
    ChainRef,
    ChainRule,
    PollSchedule,
    PollStep,
    admit_child_run,
    descend_chain,
    root_chain,
)

pytestmark = pytest.mark.anyio


# --- lineage ------------------------------------------------------------------------


def test_a_root_has_depth_zero_and_no_parent() -> None:
    root = root_chain("r1", agent="planner")
    assert (root.run_id, root.root_run_id, root.parent_run_id, root.depth, root.agent) == (
        "r1",
        "r1",
        None,
        0,
        "planner",
    )


def test_descending_keeps_the_root_and_names_the_parent() -> None:
    root = root_chain("r1")
    child = descend_chain(root, "c1", agent="reader")
    grandchild = descend_chain(child, "g1")
    assert (grandchild.root_run_id, grandchild.parent_run_id, grandchild.run_id) == (
        "r1",
        "c1",
        "g1",
    )
    assert grandchild.depth == 2
    assert grandchild.agent is None
    assert root.depth == 0  # values: descending never changes the parent
    assert grandchild.links == (ChainLink("r1"), ChainLink("c1", "reader"), ChainLink("g1"))


def test_a_chain_round_trips_through_json() -> None:
    chain = descend_chain(root_chain("r1", agent="a"), "c1")
    assert ChainRef.from_dict(json.loads(json.dumps(chain.to_dict()))) == chain


@pytest.mark.parametrize(
    "data",
    [None, {}, {"links": []}, {"links": ["r1"]}, {"links": [{"run_id": ""}]}, [1]],
)
def test_from_dict_refuses_what_to_dict_never_made(data: object) -> None:
    empty_id = data == {"links": [{"run_id": ""}]}  # the right shape with a wrong value
    with pytest.raises(ValueError if empty_id else TypeError, match=r"^ChainRef\.from_dict: "):
        ChainRef.from_dict(data)


@pytest.mark.parametrize("bad", ["", 5, None])
def test_ids_must_be_non_empty_strings(bad: object) -> None:
    error = ValueError if isinstance(bad, str) else TypeError
    with pytest.raises(error, match=r"^root_chain: run_id must be a non-empty string"):
        root_chain(bad)  # type: ignore[arg-type]
    with pytest.raises(error, match=r"^descend_chain: run_id must be"):
        descend_chain(root_chain("r"), bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^descend_chain: parent must be a ChainRef"):
        descend_chain("r", "c")  # type: ignore[arg-type]


# --- admission ----------------------------------------------------------------------


def test_a_child_within_every_limit_is_admitted_with_its_chain() -> None:
    root = root_chain("r1", agent="planner")
    decision = admit_child_run(root, "c1", child_agent="reader", running_children=0)
    assert decision.admitted
    assert decision.chain == descend_chain(root, "c1", agent="reader")
    assert decision.refusal is None
    assert not decision.retryable


def test_depth_is_limited() -> None:
    rule = ChainRule(max_depth=2)
    chain = descend_chain(descend_chain(root_chain("r"), "c"), "g")  # depth 2
    decision = admit_child_run(chain, "x", running_children=0, rule=rule)
    assert (decision.admitted, decision.refusal, decision.chain) == (False, "depth_limit", None)
    assert "at most 2 deep" in decision.detail
    assert not decision.retryable
    assert admit_child_run(
        descend_chain(root_chain("r"), "c"), "x", running_children=0, rule=rule
    ).admitted


def test_max_depth_zero_means_no_sub_agents() -> None:
    decision = admit_child_run(
        root_chain("r"), "c", running_children=0, rule=ChainRule(max_depth=0)
    )
    assert decision.refusal == "depth_limit"


def test_concurrency_is_limited_and_retryable() -> None:
    rule = ChainRule(max_concurrent_children=2)
    root = root_chain("r")
    assert admit_child_run(root, "c", running_children=1, rule=rule).admitted
    decision = admit_child_run(root, "c", running_children=2, rule=rule)
    assert (decision.refusal, decision.retryable) == ("concurrency_limit", True)
    assert "already has 2 sub-agents running" in decision.detail


def test_a_run_cannot_become_its_own_ancestor() -> None:
    chain = descend_chain(root_chain("r"), "c")
    decision = admit_child_run(chain, "r", running_children=0)
    assert decision.refusal == "cycle"
    assert "'r'" in decision.detail


def test_an_agent_cannot_delegate_back_up_its_lineage_unless_allowed() -> None:
    chain = descend_chain(root_chain("r", agent="A"), "c", agent="B")
    refused = admit_child_run(chain, "x", child_agent="A", running_children=0)
    assert refused.refusal == "cycle"
    assert "'A'" in refused.detail
    allowed = admit_child_run(
        chain, "x", child_agent="A", running_children=0, rule=ChainRule(allow_agent_recursion=True)
    )
    assert allowed.admitted
    # an unnamed agent takes no part in the check
    assert admit_child_run(chain, "x", running_children=0).admitted


def test_refusals_are_checked_cycle_then_depth_then_concurrency() -> None:
    rule = ChainRule(max_depth=0, max_concurrent_children=0)
    root = root_chain("r", agent="A")
    assert admit_child_run(root, "r", running_children=9, rule=rule).refusal == "cycle"
    assert admit_child_run(root, "c", running_children=9, rule=rule).refusal == "depth_limit"
    rule = ChainRule(max_depth=1, max_concurrent_children=0)
    assert admit_child_run(root, "c", running_children=0, rule=rule).refusal == (
        "concurrency_limit"
    )


@given(
    depth=st.integers(0, 6),
    running=st.integers(0, 8),
    max_depth=st.integers(0, 6),
    max_children=st.integers(0, 8),
)
def test_admitted_exactly_when_within_both_limits(
    depth: int, running: int, max_depth: int, max_children: int
) -> None:
    chain = root_chain("r0")
    for i in range(1, depth + 1):
        chain = descend_chain(chain, f"r{i}")
    rule = ChainRule(max_depth=max_depth, max_concurrent_children=max_children)
    decision = admit_child_run(chain, "new", running_children=running, rule=rule)
    assert decision.admitted == (depth + 1 <= max_depth and running < max_children)
    assert (decision.chain is not None) == decision.admitted


@pytest.mark.parametrize(
    ("kwargs", "error", "shown"),
    [
        ({"max_depth": -1}, ValueError, "ChainRule: max_depth must be an integer >= 0, got -1"),
        ({"max_depth": 1.5}, TypeError, "got 1.5"),
        ({"max_depth": True}, TypeError, "got True"),
        ({"max_concurrent_children": "2"}, TypeError, "max_concurrent_children"),
        # a truthy string would silently allow A -> B -> A
        (
            {"allow_agent_recursion": "no"},
            TypeError,
            "ChainRule: allow_agent_recursion must be a bool, got 'no'",
        ),
    ],
)
def test_rule_limits_are_checked(
    kwargs: dict[str, object], error: type[Exception], shown: str
) -> None:
    with pytest.raises(error) as info:
        ChainRule(**kwargs)  # type: ignore[arg-type]
    assert shown in str(info.value)


def test_admission_arguments_are_checked() -> None:
    root = root_chain("r")
    with pytest.raises(ValueError, match="running_children must be an integer >= 0, got -1"):
        admit_child_run(root, "c", running_children=-1)
    with pytest.raises(TypeError, match="parent must be a ChainRef"):
        admit_child_run("r", "c", running_children=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rule must be a ChainRule"):
        admit_child_run(root, "c", running_children=0, rule=[1])  # type: ignore[arg-type]


# --- the poll schedule --------------------------------------------------------------


def test_delays_grow_by_the_factor_up_to_the_cap() -> None:
    schedule = PollSchedule(initial=1, factor=2, max_delay=10, max_attempts=6)
    assert list(schedule) == [
        PollStep(0, 1, 1),
        PollStep(1, 2, 3),
        PollStep(2, 4, 7),
        PollStep(3, 8, 15),
        PollStep(4, 10, 25),
        PollStep(5, 10, 35),
    ]


def test_the_default_schedule_is_unbounded_and_capped_at_thirty_seconds() -> None:
    steps = iter(PollSchedule())
    delays = [next(steps).delay for _ in range(2000)]  # no overflow, however long
    assert delays[:7] == [1, 2, 4, 8, 16, 30, 30]
    assert delays[-1] == 30


def test_iterating_twice_gives_the_same_steps() -> None:
    schedule = PollSchedule(initial=0.25, factor=1.5, max_delay=2, max_attempts=8)
    assert list(schedule) == list(schedule)


async def test_poll_checks_at_the_exact_virtual_times() -> None:
    start = anyio.current_time()
    asked: list[float] = []

    async def check() -> str | None:
        asked.append(anyio.current_time() - start)
        return "done" if len(asked) == 4 else None

    schedule = PollSchedule(initial=1, factor=3, max_delay=5)
    assert await schedule.poll(check) == "done"
    assert asked == [1, 4, 9, 14]


async def test_poll_gives_up_after_max_attempts() -> None:
    start = anyio.current_time()
    calls = 0

    async def never() -> int | None:
        nonlocal calls
        calls += 1
        return None

    assert await PollSchedule(initial=2, max_attempts=3).poll(never) is None
    assert calls == 3
    assert anyio.current_time() - start == 2 + 4 + 8


async def test_a_deadline_around_poll_ends_the_wait_at_once() -> None:
    start = anyio.current_time()
    calls = 0

    async def never() -> int | None:
        nonlocal calls
        calls += 1
        return None

    with anyio.move_on_after(20) as scope:
        await PollSchedule(initial=1, factor=2, max_delay=8).poll(never)
    assert scope.cancelled_caught
    assert calls == 4  # at 1, 3, 7, 15; the next would be at 23
    assert anyio.current_time() - start == 20


async def test_a_zero_answer_is_an_answer() -> None:
    async def zero() -> int | None:
        return 0

    start = anyio.current_time()
    assert await PollSchedule(initial=0.5).poll(zero) == 0
    assert anyio.current_time() - start == 0.5


async def test_poll_refuses_a_check_that_is_not_callable() -> None:
    with pytest.raises(TypeError, match=r"^PollSchedule.poll: check must be an async callable"):
        await PollSchedule().poll(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "shown"),
    [
        ({"initial": -1}, ValueError, "initial must be a positive finite number"),
        # Zero would never back off: every later delay is a multiple of it.
        ({"initial": 0}, ValueError, "initial must be a positive finite number of seconds, got 0"),
        ({"initial": math.nan}, ValueError, "got nan"),
        ({"max_delay": 0}, ValueError, "max_delay must be a positive finite number"),
        ({"max_delay": math.inf}, ValueError, "got inf"),
        ({"factor": 0.5}, ValueError, "factor must be a finite number >= 1, got 0.5"),
        ({"factor": True}, TypeError, "got True"),
        ({"max_attempts": 0}, ValueError, "max_attempts must be an integer >= 1, got 0"),
        ({"initial": 40}, ValueError, "initial (40) must not exceed max_delay (30)"),
    ],
)
def test_schedule_arguments_are_checked(
    kwargs: dict[str, object], error: type[Exception], shown: str
) -> None:
    with pytest.raises(error, match=r"^PollSchedule: ") as info:
        PollSchedule(**kwargs)  # type: ignore[arg-type]
    assert shown in str(info.value)


@given(
    initial=st.floats(0, 10, exclude_min=True),
    factor=st.floats(1, 4),
    extra=st.floats(0, 100),
    n=st.integers(1, 60),
)
def test_delays_never_shrink_never_pass_the_cap_and_sum_to_elapsed(
    initial: float, factor: float, extra: float, n: int
) -> None:
    schedule = PollSchedule(
        initial=initial, factor=factor, max_delay=max(initial + extra, 0.001), max_attempts=n
    )
    steps = list(schedule)
    assert [s.attempt for s in steps] == list(range(n))
    assert steps[0].delay == initial
    total = 0.0
    for before, after in itertools.pairwise(steps):
        assert before.delay <= after.delay <= schedule.max_delay
    for step in steps:
        total += step.delay
        assert step.elapsed == total
