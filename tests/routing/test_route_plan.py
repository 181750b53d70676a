"""RoutePlan, RouteStage, Candidate, ClassifiedError and the outcomes: validated at construction."""

from __future__ import annotations

import math

import pytest
from route_scripts import connection_error

from juno_bind_trio.routing import (
    DEFAULT_MAX_RETRIES,
    AttemptFailure,
    Candidate,
    ClassifiedError,
    RouteAction,
    RoutePlan,
    RouteStage,
)


def test_a_candidate_derives_its_endpoint_key() -> None:
    assert Candidate("openai").endpoint == "openai"
    assert Candidate("azure", base_url="https://eu.test/v1").endpoint == "azure|https://eu.test/v1"
    assert Candidate("azure", endpoint="azure-eu").endpoint == "azure-eu"


def test_candidate_options_are_copied_read_only_and_left_out_of_the_hash() -> None:
    options = {"deployment": "gpt4o-eu"}
    candidate = Candidate("azure", options=options)
    options["deployment"] = "changed"
    assert candidate.options["deployment"] == "gpt4o-eu"
    with pytest.raises(TypeError):
        candidate.options["x"] = 1  # type: ignore[index]
    assert hash(candidate) == hash(Candidate("azure"))
    assert candidate != Candidate("azure")


def test_plan_budgets_and_attempt_count() -> None:
    plan = RoutePlan(
        [
            RouteStage("a", [Candidate("x"), Candidate("y", max_retries=0)]),
            RouteStage("b", [Candidate("x")]),
        ]
    )
    assert plan.max_retries == DEFAULT_MAX_RETRIES
    assert plan.retry_budget(plan.stages[0].candidates[1]) == 0
    assert plan.max_attempts() == 3 + 1 + 3
    assert isinstance(plan.stages, tuple)
    assert hash(plan) == hash(
        RoutePlan(
            (
                RouteStage("a", (Candidate("x"), Candidate("y", max_retries=0))),
                RouteStage("b", (Candidate("x"),)),
            )
        )
    )


def test_the_same_endpoint_in_two_stages_is_fine_but_not_twice_in_one() -> None:
    RoutePlan([RouteStage("a", [Candidate("x")]), RouteStage("b", [Candidate("x")])])
    RouteStage("a", [Candidate("x"), Candidate("x", model="a-mini")])
    with pytest.raises(ValueError, match=r"RouteStage: endpoint 'x' serves model 'a' twice"):
        RouteStage("a", [Candidate("x"), Candidate("x", max_retries=4)])


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (
            lambda: Candidate(""),
            ValueError,
            "Candidate: provider must be a non-blank str, got ''",
        ),
        (lambda: Candidate(3), TypeError, "Candidate: provider must be a non-blank str, got 3"),  # type: ignore[arg-type]
        (lambda: Candidate("x", base_url=""), ValueError, "Candidate: base_url must be"),
        (lambda: Candidate("x", model=" "), ValueError, "Candidate: model must be"),
        (lambda: Candidate("x", model=3), TypeError, "Candidate: model must be"),  # type: ignore[arg-type]
        (lambda: Candidate("x", endpoint=""), ValueError, "Candidate: endpoint must be"),
        (
            lambda: Candidate("x", max_retries=-1),
            ValueError,
            "Candidate: max_retries must be a non-negative integer or None, got -1",
        ),
        (lambda: Candidate("x", max_retries=True), TypeError, "got True"),
        (lambda: Candidate("x", max_retries=1.5), TypeError, "got 1.5"),  # type: ignore[arg-type]
        (lambda: Candidate("x", options=[1]), TypeError, "Candidate: options must be a mapping"),  # type: ignore[arg-type]
        (lambda: RouteStage("", [Candidate("x")]), ValueError, "RouteStage: model must be"),
        (
            lambda: RouteStage("m", []),
            ValueError,
            r"RouteStage: candidates must be a non-empty sequence of Candidate objects, got \[\]",
        ),
        (lambda: RouteStage("m", "x"), TypeError, "RouteStage: candidates must be a non-empty seq"),  # type: ignore[arg-type]
        (lambda: RouteStage("m", ["x"]), TypeError, "of Candidate objects, got \\['x'\\]"),  # type: ignore[list-item]
        (lambda: RoutePlan([]), ValueError, r"RoutePlan: stages must be a non-empty sequence"),
        (lambda: RoutePlan(None), TypeError, "RoutePlan: stages must be a non-empty sequence"),  # type: ignore[arg-type]
        (lambda: RoutePlan([Candidate("x")]), TypeError, "of RouteStage objects, got"),  # type: ignore[list-item]
        (
            lambda: RoutePlan([RouteStage("m", [Candidate("x")])], max_retries=math.nan),  # type: ignore[arg-type]
            TypeError,
            "RoutePlan: max_retries must be a non-negative integer, got nan",
        ),
        (
            lambda: RoutePlan([RouteStage("m", [Candidate("x")])], max_retry_wait=-1),
            ValueError,
            "RoutePlan: max_retry_wait must be a non-negative finite number of seconds, got -1",
        ),
        (
            lambda: RoutePlan([RouteStage("m", [Candidate("x")])], max_retry_wait="5"),  # type: ignore[arg-type]
            TypeError,
            "RoutePlan: max_retry_wait must be a non-negative finite number of seconds, got '5'",
        ),
    ],
)
def test_bad_plans_are_refused_by_name(build: object, error: type[Exception], message: str) -> None:
    assert callable(build)
    with pytest.raises(error, match=message):
        build()


def test_classified_error_and_failure_validate_their_fields() -> None:
    cause = connection_error()
    with pytest.raises(TypeError, match="ClassifiedError: action must be a RouteAction"):
        ClassifiedError("next_candidate", cause)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_after must be finite and non-negative, got inf"):
        ClassifiedError(RouteAction.NEXT_CANDIDATE, cause, retry_after=math.inf)
    with pytest.raises(TypeError, match="AttemptFailure: error must be a ClassifiedError"):
        AttemptFailure(cause)  # type: ignore[arg-type]
    verdict = ClassifiedError(RouteAction.NEXT_CANDIDATE, cause, retry_after=2)
    assert verdict.retry_after == 2.0
    # The stream object (always truthy) instead of its flag would clamp every failure.
    with pytest.raises(TypeError, match="AttemptFailure: produced_output must be a bool"):
        AttemptFailure(verdict, produced_output=object())  # type: ignore[arg-type]
