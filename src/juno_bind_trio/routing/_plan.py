"""What routing may try, in which order: plans, stages, candidates, and the cursor.

A plan is data, validated once when it is built, so that a typo in a
deployment's configuration fails at start-up with a message naming the value,
not at three in the morning on the first 503 that reaches the second stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final, TypeAlias

import attrs

from juno_bind_trio._validate import (
    a_mapping,
    count,
    instance_of,
    non_empty_str,
    optional,
    positive_seconds,
    sequence_of,
)

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_WAIT",
    "Candidate",
    "RouteCursor",
    "RoutePlan",
    "RouteStage",
]

DEFAULT_MAX_RETRIES: Final = 2
"""Same-endpoint retries a candidate gets after its first attempt, unless it says otherwise.

Two, the seed's completion-defect budget: with it a plan of three stages of
three candidates may make 27 attempts, which is the arithmetic behind the
seed's warning that a retractable surface "can legally wipe the screen more
than twenty times".
"""

DEFAULT_MAX_RETRY_WAIT: Final = 10.0
"""The longest ``retry_after`` (seconds) the executor waits out before a same-endpoint retry.

A longer one is not waited for: routing moves to the next candidate instead,
because another provider that can answer now beats a turn that sits silent.
"""


_NAME: Final = non_empty_str(blank=False)
_OPTIONAL_NAME: Final = optional(_NAME)
_RETRIES: Final = count()
_WAIT: Final = positive_seconds(zero=True)


def _candidate_max_retries(value: int | None) -> int | None:
    return optional(_RETRIES).check("Candidate: max_retries", value)


def _candidate_options(given: Mapping[str, object]) -> Mapping[str, object]:
    value = a_mapping().check("Candidate: options", given)
    # Copied and frozen: a plan is shared by every turn that routes through it,
    # and one turn mutating a candidate's options would change the others'.
    return MappingProxyType(dict(value))


def _provider(value: str) -> str:
    return _NAME.check("Candidate: provider", value)


def _base_url(value: str | None) -> str | None:
    return _OPTIONAL_NAME.check("Candidate: base_url", value)


def _candidate_model(value: str | None) -> str | None:
    return _OPTIONAL_NAME.check("Candidate: model", value)


def _endpoint(value: str) -> str:
    return _NAME.check("Candidate: endpoint", value)


def _stage_model(value: str) -> str:
    return _NAME.check("RouteStage: model", value)


def _plan_max_retries(value: int) -> int:
    return _RETRIES.check("RoutePlan: max_retries", value)


def _plan_max_retry_wait(value: float) -> float:
    return _WAIT.check("RoutePlan: max_retry_wait", value)


def _default_endpoint(self: Candidate) -> str:
    return f"{self.provider}|{self.base_url}" if self.base_url else str(self.provider)


@attrs.frozen
class Candidate:
    """One provider endpoint that may serve a stage's model.

    ``Candidate("openai", base_url=None, model=None, endpoint=None, max_retries=None, options={})``

    *provider* names who serves it (``"openai"``, ``"azure-eu"``, ``"openrouter"``);
    *base_url* where, for OpenAI-compatible clients. *model* overrides the
    stage's model name on this provider only, for providers that spell the same
    model differently (``"gpt-4o"`` against ``"openai/gpt-4o"``); the attempt
    function reads the name to send from
    [`RouteCursor.model`][juno_bind_trio.routing.RouteCursor.model].

    *endpoint* is the key the [`CircuitBreaker`][juno_bind_trio.routing.CircuitBreaker] counts
    failures under, ``provider|base_url`` (or just *provider*) unless given. Two candidates in
    different stages with the same endpoint share one breaker: if the host is
    down, it is down for every model it serves.

    *max_retries* overrides the plan's same-endpoint retry budget for this
    candidate. *options* is free-form data for your attempt function (a
    deployment name, extra headers); it is copied and read-only, and left out
    of the hash.
    """

    provider: str = attrs.field(converter=_provider)
    base_url: str | None = attrs.field(
        default=None,
        kw_only=True,
        converter=_base_url,
    )
    model: str | None = attrs.field(
        default=None,
        kw_only=True,
        converter=_candidate_model,
    )
    endpoint: str = attrs.field(
        default=attrs.Factory(_default_endpoint, takes_self=True),
        kw_only=True,
        converter=_endpoint,
    )
    max_retries: int | None = attrs.field(
        default=None, kw_only=True, converter=_candidate_max_retries
    )
    options: Mapping[str, object] = attrs.field(
        factory=dict, kw_only=True, converter=_candidate_options, hash=False
    )


_CANDIDATES: Final = sequence_of(
    instance_of(Candidate), non_empty=True, expects="a non-empty sequence of Candidate objects"
)


def _stage_candidates(value: Iterable[Candidate]) -> tuple[Candidate, ...]:
    # A single item (or a str, or a mapping) passed where a list was meant is refused.
    return _CANDIDATES.check("RouteStage: candidates", value)


@attrs.frozen
class RouteStage:
    """One model and the provider endpoints that may serve it, in the order to try them.

    ``RouteStage(model, candidates)``. A plan's first stage is the model you
    want; later stages are its fallback models.
    """

    model: str = attrs.field(converter=_stage_model)
    candidates: tuple[Candidate, ...] = attrs.field(converter=_stage_candidates)

    def __attrs_post_init__(self) -> None:
        # The same endpoint serving the same model twice in one stage is a
        # configuration slip, never a strategy: it only doubles the attempts a
        # dead endpoint costs. (Retries belong in max_retries.)
        seen: set[tuple[str, str]] = set()
        for candidate in self.candidates:
            key = (candidate.endpoint, candidate.model or self.model)
            if key in seen:
                raise ValueError(
                    f"RouteStage: endpoint {candidate.endpoint!r} serves model {key[1]!r} "
                    "twice in one stage; use Candidate(max_retries=...) for retries"
                )
            seen.add(key)


_STAGES: Final = sequence_of(
    instance_of(RouteStage), non_empty=True, expects="a non-empty sequence of RouteStage objects"
)


def _plan_stages(value: Iterable[RouteStage]) -> tuple[RouteStage, ...]:
    return _STAGES.check("RoutePlan: stages", value)


_Step: TypeAlias = "tuple[int, int, Candidate, int, str, int, RouteCursor]"
"""One candidate as the executor walks the plan: see ``RoutePlan._flat``."""


@attrs.frozen
class RoutePlan:
    """Everything routing may try for one request, in order.

    ``RoutePlan(stages, max_retries=2, max_retry_wait=10.0)``

    *stages* run in order, and each stage's candidates in order; see
    [`execute_route_plan()`][juno_bind_trio.routing.execute_route_plan] for the traversal.
    *max_retries* is the same-endpoint retry budget of every candidate that does not set its own.
    *max_retry_wait* is the longest server-requested wait (``retry_after``)
    the executor sits out before a same-endpoint retry; a longer one sends it
    to the next candidate at once.

    Immutable and hashable, so one plan can be built at start-up and shared by
    every concurrent turn.
    """

    stages: tuple[RouteStage, ...] = attrs.field(converter=_plan_stages)
    max_retries: int = attrs.field(
        default=DEFAULT_MAX_RETRIES,
        kw_only=True,
        converter=_plan_max_retries,
    )
    max_retry_wait: float = attrs.field(
        default=DEFAULT_MAX_RETRY_WAIT,
        kw_only=True,
        converter=_plan_max_retry_wait,
    )

    # The executor's view of the plan, computed once: every candidate in plan
    # order, flat, as (stage index, candidate index, candidate, retry budget,
    # model to send, position in the flat order, the cursor of its first attempt
    # when no attempt before it was skipped or retried). A plan is built once and
    # routed many times, so this keeps the per-attempt path to a few local reads.
    _flat: tuple[_Step, ...] = attrs.field(init=False, eq=False, hash=False, repr=False)

    # The same walk with only what a route without a breaker, retries or skips
    # reads: (candidate, the cursor of its first attempt, position).
    _straight: tuple[tuple[Candidate, RouteCursor, int], ...] = attrs.field(
        init=False, eq=False, hash=False, repr=False
    )

    # Cursors are values, so every turn routed through this plan can share them:
    # keyed by (stage, candidate, attempt on it, attempt overall), bounded by the
    # square of max_attempts(); the cursors off the plan's straight path (after a
    # retry or a skipped candidate) are built here on first use.
    _cursors: dict[tuple[int, int, int, int], RouteCursor] = attrs.field(
        init=False, factory=dict, eq=False, hash=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        flat: list[_Step] = []
        for stage_index, stage in enumerate(self.stages):
            for candidate_index, candidate in enumerate(stage.candidates):
                model = candidate.model or stage.model
                position = len(flat)
                first = RouteCursor(stage_index, candidate_index, 1, position + 1, model)
                budget = self.retry_budget(candidate)
                step = (stage_index, candidate_index, candidate, budget, model, position, first)
                flat.append(step)
        object.__setattr__(self, "_flat", tuple(flat))
        straight = tuple((step[2], step[6], step[5]) for step in flat)
        object.__setattr__(self, "_straight", straight)

    def retry_budget(self, candidate: Candidate) -> int:
        """Same-endpoint retries *candidate* gets after its first attempt."""
        return self.max_retries if candidate.max_retries is None else candidate.max_retries

    def max_attempts(self) -> int:
        """The most attempts this plan can make, if every one fails and may be retried."""
        return sum(1 + self.retry_budget(c) for stage in self.stages for c in stage.candidates)


@attrs.frozen
class RouteCursor:
    """Where in the plan an attempt is. Passed to the attempt function and the classifier.

    Indices count from 0, attempt numbers from 1: the first attempt of a turn
    is ``RouteCursor(stage_index=0, candidate_index=0, candidate_attempt=1,
    attempt=1, model=...)``.
    """

    stage_index: int
    """Which stage (0 is the primary model)."""
    candidate_index: int
    """Which candidate within the stage."""
    candidate_attempt: int
    """The attempt number on this candidate: 1, then 2 and up for same-endpoint retries."""
    attempt: int
    """The attempt number across the whole plan."""
    model: str
    """The model name to send: the candidate's own ``model`` if set, else the stage's."""

    @property
    def is_retry(self) -> bool:
        """Whether this is a same-endpoint retry (``candidate_attempt > 1``)."""
        return self.candidate_attempt > 1
