"""Sub-agents: who descends from whom, whether another may start, and how to wait for one.

A run that starts runs of its own (a research agent fanning out to readers, a
planner delegating a step) can go wrong in three ways that a single run
cannot, and each is cheap to refuse *before* the child exists and expensive
after:

* **Depth.** A child that starts a child that starts a child: each level
  spends a full model budget, and a model asked to "delegate when unsure"
  is unsure at every level.
* **Breadth.** Forty children at once: a provider's rate limit for the whole
  account, spent by one user's run.
* **Cycles.** Agent A delegates to B, which delegates back to A: no depth
  limit a person would choose is low enough to stop this before it has cost
  real money, and it is never what anyone meant.

Lineage is a value, not a lookup
--------------------------------

[`ChainRef`][juno_bind_trio.run.ChainRef] is the run's whole ancestry, root first, carried with the
run (persist it with the run record; hand it to the child when starting it).
Admission then needs no database query and no lock: everything it decides
on travels with the parent. The one fact that does not travel, how many
children the parent has running right now, is the caller's to count and pass
in, because only the host knows where its children run (tasks here, jobs on
another machine).

Each link names a run id and, optionally, an *agent*: whatever the host calls
the kind of agent that run is (its definition's name, its prompt id). Run ids
are fresh per run, so a cycle of run ids only catches a run being re-parented
under itself; the agent is what catches A → B → A. A run with no agent name
takes no part in agent-cycle checks.

Polling a child
---------------

A parent whose child runs elsewhere learns that it finished by asking.
[`PollSchedule`][juno_bind_trio.run.PollSchedule] spaces the questions out: quickly at first (most
children are short), then backing off to a cap. It is deterministic (no
jitter), so a test can assert the exact times a parent polled at, and it has
no timeout of its own: the caller owns timeouts, and a
[`RunDeadline`][juno_bind_trio.run.RunDeadline] or ``anyio.fail_after`` around the wait composes
where a ``timeout=`` argument would not.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal, TypeAlias, TypeVar, final

import anyio
import attrs

from juno_bind_trio._validate import error_kind, real_number, shown

__all__ = [
    "ChainLink",
    "ChainRef",
    "ChainRule",
    "ChildAdmission",
    "ChildRefusal",
    "PollSchedule",
    "PollStep",
    "admit_child_run",
    "descend_chain",
    "root_chain",
]

T = TypeVar("T")


def _id(what: str, value: object) -> str:
    if not isinstance(value, str) or value == "":
        raise error_kind(value, str)(f"{what} must be a non-empty string, got {value!r}")
    return value


def _agent(what: str, value: object) -> str | None:
    return None if value is None else _id(what, value)


@final
@attrs.frozen
class ChainLink:
    """One run in a lineage: its ``run_id`` and, if the host names it, its ``agent``."""

    run_id: str
    agent: str | None = None


@final
@attrs.frozen
class ChainRef:
    """A run's lineage: its ancestors and itself, root first.

    Build one with [`root_chain()`][juno_bind_trio.run.root_chain] and
    [`descend_chain()`][juno_bind_trio.run.descend_chain]; it is a frozen value, safe to share and
    to persist ([`to_dict()`][juno_bind_trio.run.ChainRef.to_dict]).
    """

    links: tuple[ChainLink, ...]

    @property
    def run_id(self) -> str:
        """This run's id (the last link)."""
        return self.links[-1].run_id

    @property
    def agent(self) -> str | None:
        """This run's agent, if named."""
        return self.links[-1].agent

    @property
    def root_run_id(self) -> str:
        """The id of the run the whole tree started from."""
        return self.links[0].run_id

    @property
    def parent_run_id(self) -> str | None:
        """The parent's run id, or ``None`` for a root run."""
        return self.links[-2].run_id if len(self.links) > 1 else None

    @property
    def depth(self) -> int:
        """0 for a root run, 1 for its children, and so on."""
        return len(self.links) - 1

    def to_dict(self) -> dict[str, list[dict[str, str | None]]]:
        """A JSON-ready form, for persisting with the run record."""
        return {"links": [{"run_id": link.run_id, "agent": link.agent} for link in self.links]}

    @classmethod
    def from_dict(cls, data: object) -> ChainRef:
        """Rebuild a chain from [`to_dict()`][juno_bind_trio.run.ChainRef.to_dict]'s output.

        :raises TypeError: *data* is not that shape.
        """
        links = data.get("links") if isinstance(data, dict) else None
        if not isinstance(links, list) or not links:
            raise TypeError(f"ChainRef.from_dict: expected {{'links': [...]}}, got {data!r}")
        built: list[ChainLink] = []
        for link in links:
            if not isinstance(link, dict):
                raise TypeError(f"ChainRef.from_dict: a link must be a dict, got {link!r}")
            built.append(
                ChainLink(
                    _id("ChainRef.from_dict: run_id", link.get("run_id")),
                    _agent("ChainRef.from_dict: agent", link.get("agent")),
                )
            )
        return cls(tuple(built))


def root_chain(run_id: str, *, agent: str | None = None) -> ChainRef:
    """The lineage of a run that nothing started: depth 0.

    :raises TypeError: *run_id* is not a string, or *agent* is neither a string
        nor ``None``.
    :raises ValueError: *run_id* or *agent* is empty.
    """
    return ChainRef(
        (ChainLink(_id("root_chain: run_id", run_id), _agent("root_chain: agent", agent)),)
    )


def descend_chain(parent: ChainRef, run_id: str, *, agent: str | None = None) -> ChainRef:
    """The lineage of a child of *parent*: one link longer.

    Pure bookkeeping: it refuses nothing. Ask
    [`admit_child_run()`][juno_bind_trio.run.admit_child_run] first (an admitted decision carries
    this chain already).

    :raises TypeError: *parent* is not a [`ChainRef`][juno_bind_trio.run.ChainRef], or an id is not
        a non-empty string.
    """
    if not isinstance(parent, ChainRef):
        raise TypeError(f"descend_chain: parent must be a ChainRef, got {parent!r}")
    link = ChainLink(_id("descend_chain: run_id", run_id), _agent("descend_chain: agent", agent))
    return ChainRef((*parent.links, link))


def _count(what: str, value: object, *, minimum: int) -> int:
    # bool is an int, and `True` is never a limit someone meant.
    if isinstance(value, (bool, float)):
        raise TypeError(f"{what} must be an integer >= {minimum}, got {value!r}")
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be an integer >= {minimum}, got {value!r}") from None
    if count < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {count!r}")
    return count


def _max_depth(value: int) -> int:
    return _count("ChainRule: max_depth", value, minimum=0)


def _max_children(value: int) -> int:
    return _count("ChainRule: max_concurrent_children", value, minimum=0)


def _flag(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"ChainRule: {attribute.name} must be a bool, got {value!r}")


@final
@attrs.frozen(kw_only=True)
class ChainRule:
    """The limits [`admit_child_run()`][juno_bind_trio.run.admit_child_run] enforces.

    ``max_depth``: the deepest a run may be (a root is 0; default 3). 0 means
    no sub-agents at all.
    ``max_concurrent_children``: children one parent may have running at once
    (default 5).
    ``allow_agent_recursion``: whether an agent may appear again below itself
    (default ``False``: A → B → A is refused). Turn it on for an agent that
    is meant to divide its work among copies of itself; the depth limit still
    bounds it.
    """

    max_depth: int = attrs.field(default=3, converter=_max_depth)
    max_concurrent_children: int = attrs.field(default=5, converter=_max_children)
    allow_agent_recursion: bool = attrs.field(default=False, validator=_flag)


ChildRefusal: TypeAlias = Literal["cycle", "depth_limit", "concurrency_limit"]
"""Why a child was refused. Only ``"concurrency_limit"`` can change by waiting."""


@final
@attrs.frozen
class ChildAdmission:
    """The answer of [`admit_child_run()`][juno_bind_trio.run.admit_child_run].

    ``admitted``; when admitted, ``chain`` is the child's lineage (start the
    child with it). When refused, ``refusal`` says why and ``detail`` says it
    in a sentence fit for a tool result, since the usual caller is a model
    that asked for a sub-agent and needs to know what to do instead.
    """

    admitted: bool
    chain: ChainRef | None
    refusal: ChildRefusal | None
    detail: str

    @property
    def retryable(self) -> bool:
        """True when waiting for a running child to finish could change the answer."""
        return self.refusal == "concurrency_limit"


def admit_child_run(
    parent: ChainRef,
    child_run_id: str,
    *,
    child_agent: str | None = None,
    running_children: int,
    rule: ChainRule | None = None,
) -> ChildAdmission:
    """Decide whether *parent* may start a child run now.

    *running_children*: how many children *parent* has running at this
    moment, counted by the host. *rule*: the limits (default
    [`ChainRule`][juno_bind_trio.run.ChainRule] ``()``).

    Checked in the order a fix would be found: a cycle (never admissible),
    then depth (admissible only by restructuring), then concurrency (admissible
    later). A pure function: it records nothing, so count the admitted child
    as running before admitting the next.
    """
    if not isinstance(parent, ChainRef):
        raise TypeError(f"admit_child_run: parent must be a ChainRef, got {parent!r}")
    rule = ChainRule() if rule is None else rule
    if not isinstance(rule, ChainRule):
        raise TypeError(f"admit_child_run: rule must be a ChainRule, got {rule!r}")
    running = _count("admit_child_run: running_children", running_children, minimum=0)
    chain = descend_chain(parent, child_run_id, agent=child_agent)
    if any(link.run_id == child_run_id for link in parent.links):
        return ChildAdmission(
            False,
            None,
            "cycle",
            f"Run {child_run_id!r} is already in this run's lineage; a run cannot be its own "
            "ancestor.",
        )
    if (
        child_agent is not None
        and not rule.allow_agent_recursion
        and any(link.agent == child_agent for link in parent.links)
    ):
        return ChildAdmission(
            False,
            None,
            "cycle",
            f"Agent {child_agent!r} is already running above this one in the lineage; "
            "delegating back to it would loop. Do this step here instead.",
        )
    if chain.depth > rule.max_depth:
        return ChildAdmission(
            False,
            None,
            "depth_limit",
            f"Sub-agents may nest at most {rule.max_depth} deep and this one would be at depth "
            f"{chain.depth}. Do this step here instead.",
        )
    if running >= rule.max_concurrent_children:
        return ChildAdmission(
            False,
            None,
            "concurrency_limit",
            f"This run already has {running} sub-agents running (the limit is "
            f"{rule.max_concurrent_children}). Wait for one to finish, then try again.",
        )
    return ChildAdmission(True, chain, None, f"Admitted at depth {chain.depth}.")


# --- polling a child's completion ----------------------------------------------------


@final
@attrs.frozen
class PollStep:
    """One poll: the ``attempt`` number (from 0), the ``delay`` to wait before it, and the
    ``elapsed`` total of all delays up to and including this one."""

    attempt: int
    delay: float
    elapsed: float


def _delay(what: str, value: object, *, allow_zero: bool) -> float:
    kind = "a non-negative" if allow_zero else "a positive"
    message = f"PollSchedule: {what} must be {kind} finite number of seconds, got {shown(value)}"
    seconds = real_number(value)
    if seconds is None:
        raise TypeError(message)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError(message)
    return seconds


def _initial(value: float) -> float:
    # Zero is refused: every later delay is a multiple of it, so a schedule
    # starting at zero would never back off and would poll in a tight loop. A
    # host that wants an immediate first check calls it before polling.
    return _delay("initial", value, allow_zero=False)


def _max_delay(value: float) -> float:
    return _delay("max_delay", value, allow_zero=False)


def _factor(given: float) -> float:
    value: object = given  # checked at run time, whatever the type says
    message = f"PollSchedule: factor must be a finite number >= 1, got {shown(value)}"
    factor = real_number(value)
    if factor is None:
        raise TypeError(message)
    if not math.isfinite(factor) or factor < 1:
        raise ValueError(message)
    return factor


def _max_attempts(value: int | None) -> int | None:
    return None if value is None else _count("PollSchedule: max_attempts", value, minimum=1)


@final
@attrs.frozen(kw_only=True)
class PollSchedule:
    """A deterministic, capped back-off: ``initial``, then times ``factor``, up to ``max_delay``.

    Defaults: 1 s, doubling, capped at 30 s, with no limit on attempts
    (bound the wait with a deadline instead). Iterating gives the
    [`PollStep`][juno_bind_trio.run.PollStep] s; [`poll()`][juno_bind_trio.run.PollSchedule.poll]
    does the waiting. Each delay is the previous one times ``factor``, capped, so the sequence never
    overflows and is the same on every run and every machine.
    """

    initial: float = attrs.field(default=1.0, converter=_initial)
    factor: float = attrs.field(default=2.0, converter=_factor)
    max_delay: float = attrs.field(default=30.0, converter=_max_delay)
    max_attempts: int | None = attrs.field(default=None, converter=_max_attempts)

    def __attrs_post_init__(self) -> None:
        if self.initial > self.max_delay:
            raise ValueError(
                f"PollSchedule: initial ({self.initial:g}) must not exceed "
                f"max_delay ({self.max_delay:g})"
            )

    def __iter__(self) -> Iterator[PollStep]:
        delay, elapsed, attempt = self.initial, 0.0, 0
        while self.max_attempts is None or attempt < self.max_attempts:
            elapsed += delay
            yield PollStep(attempt, delay, elapsed)
            attempt += 1
            delay = min(self.max_delay, delay * self.factor)

    async def poll(self, check: Callable[[], Awaitable[T | None]]) -> T | None:
        """Wait each step's delay, then ``await check()``; return its first non-``None`` answer.

        Returns ``None`` if ``max_attempts`` ran out first. Every wait is a
        checkpoint, so a cancel or a deadline around it ends the wait at once.
        """
        if not callable(check):
            raise TypeError(f"PollSchedule.poll: check must be an async callable, got {check!r}")
        for step in self:
            await anyio.sleep(step.delay)
            answer = await check()
            if answer is not None:
                return answer
        return None
