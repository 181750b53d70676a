"""Budgets for one run: [UsageLimits][juno_bind_trio.agent.UsageLimits]."""

from __future__ import annotations

from typing import Any, final

import attrs

from juno_bind_trio.loop import ModelTurnResult

__all__ = ["UsageLimits", "UsageMeter"]


def _limit(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"UsageLimits: {name} must be a non-negative int or None, got {value!r}"
            )
        if value < 0:
            raise ValueError(
                f"UsageLimits: {name} must be a non-negative int or None, got {value!r}"
            )

    return attrs.field(default=None, validator=check, kw_only=True)


@final
@attrs.frozen
class UsageLimits:
    """What one run may spend before it stops; ``None`` (the default) is no limit.

    * *request_limit*: model requests, each one the run makes: one per turn,
      and one per structured-output re-ask (the answer did not match
      ``output_type`` and the model is asked again, inside the same turn),
      as ``RunStats.model_calls`` counts them. Checked before each request,
      re-asks included: the run never makes request ``request_limit + 1``. A
      re-ask it may not make ends the run with the answer that did not
      match in the transcript and the re-ask after it, unsent. (A provider's
      own retries and fallbacks inside one request are routing's, and not
      counted.)
    * *input_tokens_limit*, *output_tokens_limit*, *total_tokens_limit*:
      tokens summed over the run's responses, as the provider reports them
      (what [RunStats][juno_bind_trio.loop.RunStats] sums), the answers a
      re-ask replaced included. Checked after each response and before each
      request.
    * *tool_calls_limit*: tool calls the run may run. Checked when a response
      asks for calls: a batch that would go past it does not run at all.

    A run that reaches a limit stops softly, at a point where its transcript
    answers every call, and raises
    [UsageLimitExceeded][juno_bind_trio.UsageLimitExceeded] carrying the
    result so far. Give limits to the [Agent][juno_bind_trio.agent.Agent]
    (every run) or to one run (``run(..., usage_limits=...)``, which replaces
    the agent's). Each run counts from zero, a resumed run
    (``resume(..., usage_limits=...)``) included: the store keeps no usage,
    so a resume spends a budget of its own.
    """

    request_limit: int | None = _limit("request_limit")
    input_tokens_limit: int | None = _limit("input_tokens_limit")
    output_tokens_limit: int | None = _limit("output_tokens_limit")
    total_tokens_limit: int | None = _limit("total_tokens_limit")
    tool_calls_limit: int | None = _limit("tool_calls_limit")


@final
class UsageMeter:
    """One run's spending against its limits; the first limit it hits is kept."""

    def __init__(self, limits: UsageLimits) -> None:
        self.limits: UsageLimits = limits
        self.requests: int = 0
        self.input_tokens: int = 0
        self.output_tokens: int = 0
        self.tool_calls: int = 0
        self.exceeded: tuple[str, int, int] | None = None  # (limit name, limit, used)

    def _hit(self, name: str, limit: int, used: int) -> bool:
        if self.exceeded is None:
            self.exceeded = (name, limit, used)
        return True

    def _tokens_over(self) -> bool:
        limits = self.limits
        for name, limit, used in (
            ("input_tokens_limit", limits.input_tokens_limit, self.input_tokens),
            ("output_tokens_limit", limits.output_tokens_limit, self.output_tokens),
            (
                "total_tokens_limit",
                limits.total_tokens_limit,
                self.input_tokens + self.output_tokens,
            ),
        ):
            if limit is not None and used > limit:
                return self._hit(name, limit, used)
        return False

    def may_request(self) -> bool:
        """Before a model request: False (and the limit recorded) when it may not be made."""
        limit = self.limits.request_limit
        if limit is not None and self.requests >= limit:
            self._hit("request_limit", limit, self.requests)
            return False
        return not self._tokens_over()

    def answered(self, result: ModelTurnResult) -> bool:
        """After a response: count it; False when its calls must not run (a limit is over)."""
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        if self._tokens_over():
            return False
        limit = self.limits.tool_calls_limit
        calls = len(result.tool_calls)
        if limit is not None and calls and self.tool_calls + calls > limit:
            self._hit("tool_calls_limit", limit, self.tool_calls + calls)
            return False
        self.tool_calls += calls
        return True
