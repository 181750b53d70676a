"""Scripted attempt functions and real SDK errors for the routing tests.

The errors are built the way the openai SDK builds them (an ``httpx2.Request``
for connection errors, an ``httpx2.Response`` for status errors), never as
look-alikes: the classifier must be tested on what the SDK really raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import attrs
import httpx2
import openai

from juno_bind_trio.routing import (
    AttemptFailure,
    AttemptSuccess,
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteStage,
)

URL = "https://provider.test/v1/chat/completions"
# Only its status-error factory is used; it never sends a request.
_SDK = openai.AsyncOpenAI(api_key="test", base_url="https://provider.test/v1", max_retries=0)


def connection_error() -> openai.APIConnectionError:
    return openai.APIConnectionError(request=httpx2.Request("POST", URL))


def status_error(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Exception:
    """A status error exactly as ``AsyncOpenAI._make_status_error`` builds it from a response."""
    response = httpx2.Response(
        status, headers=headers, json=body, request=httpx2.Request("POST", URL)
    )
    data = body.get("error", body) if isinstance(body, dict) else body
    return _SDK._make_status_error(f"Error code: {status}", body=data, response=response)


def fail(
    action: RouteAction,
    *,
    produced_output: bool = False,
    retry_after: float | None = None,
    cause: Exception | None = None,
) -> AttemptFailure:
    error = cause if cause is not None else connection_error()
    return AttemptFailure(
        ClassifiedError(action, error, retry_after=retry_after), produced_output=produced_output
    )


def plan(shape: Sequence[int], *, max_retries: int = 2, max_retry_wait: float = 10.0) -> RoutePlan:
    """A plan of ``len(shape)`` stages, stage *i* with ``shape[i]`` candidates ``p{i}{j}``."""
    return RoutePlan(
        [
            RouteStage(f"model-{i}", [Candidate(f"p{i}{j}") for j in range(n)])
            for i, n in enumerate(shape)
        ],
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
    )


@attrs.define
class Call:
    endpoint: str
    cursor: RouteCursor
    at: float


Outcome = AttemptSuccess[str] | AttemptFailure


@attrs.define
class Script:
    """An attempt function that plays back *outcomes* in order, taking *duration* each.

    A callable outcome is called with ``(candidate, cursor)`` instead. Past the
    end of the list every attempt succeeds with ``"ok"``.
    """

    outcomes: list[Outcome | Callable[[Candidate, RouteCursor], Outcome]]
    duration: float = 1.0
    calls: list[Call] = attrs.field(factory=list)

    async def __call__(self, candidate: Candidate, cursor: RouteCursor) -> Outcome:
        self.calls.append(Call(candidate.endpoint, cursor, anyio.current_time()))
        if self.duration:
            await anyio.sleep(self.duration)
        index = len(self.calls) - 1
        if index >= len(self.outcomes):
            return AttemptSuccess("ok")
        outcome = self.outcomes[index]
        return outcome(candidate, cursor) if callable(outcome) else outcome

    @property
    def visited(self) -> list[tuple[int, int, int]]:
        return [
            (c.cursor.stage_index, c.cursor.candidate_index, c.cursor.candidate_attempt)
            for c in self.calls
        ]
