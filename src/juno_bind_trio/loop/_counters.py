"""What a run has cost and what its observers were sent, counted as plain ints.

The hot path adds to integers; the frozen records a host reads,
[`RunStats`][juno_bind_trio.loop.RunStats] and
[`ToolLoopStatistics`][juno_bind_trio.loop.ToolLoopStatistics], are built only
when someone asks, so counting costs a run nothing it can measure.
"""

from __future__ import annotations

from typing import final

import attrs

from ._results import RunStats

__all__ = ["Counters", "ToolLoopStatistics"]


@attrs.frozen
class ToolLoopStatistics:
    """A snapshot of a [`ToolLoop`][juno_bind_trio.loop.ToolLoop]'s observer traffic, from
    [`ToolLoop.statistics()`][juno_bind_trio.loop.ToolLoop.statistics].

    ``events_dropped`` counts events ``send_nowait`` refused (the channel was
    full, or closed at either end): they are lost, and the loop went on.
    """

    iterations: int
    events_sent: int
    events_dropped: int
    interrupts_received: int


@final
class Counters:
    """One loop's counts: a [`RunStats`][juno_bind_trio.loop.RunStats] in the making, and
    its observer traffic."""

    __slots__ = (
        "cached_tokens",
        "compactions",
        "cost",
        "events_dropped",
        "events_sent",
        "input_tokens",
        "interrupts_received",
        "model_calls",
        "model_seconds",
        "output_tokens",
        "reasoning_tokens",
        "text_sink_errors",
        "tool_calls",
        "tool_calls_interrupted",
        "tool_calls_not_run",
        "tool_failures",
        "tool_seconds",
        "turns",
    )

    def __init__(self) -> None:
        self.turns = 0  # model calls this loop started
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.reasoning_tokens = 0
        self.cost = 0.0
        self.model_seconds = 0.0
        self.tool_seconds = 0.0
        self.tool_calls = 0
        self.tool_failures = 0
        self.tool_calls_not_run = 0
        self.tool_calls_interrupted = 0
        self.compactions = 0
        self.text_sink_errors = 0
        self.events_sent = 0
        self.events_dropped = 0
        self.interrupts_received = 0

    def stats(self) -> RunStats:
        """The run's costs so far, as the frozen record."""
        return RunStats(
            model_calls=self.model_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost=self.cost,
            model_seconds=self.model_seconds,
            tool_seconds=self.tool_seconds,
            tool_calls=self.tool_calls,
            tool_failures=self.tool_failures,
            tool_calls_not_run=self.tool_calls_not_run,
            tool_calls_interrupted=self.tool_calls_interrupted,
            compactions=self.compactions,
            text_sink_errors=self.text_sink_errors,
            cached_tokens=self.cached_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )

    def statistics(self) -> ToolLoopStatistics:
        """The observer traffic so far, as the frozen record."""
        return ToolLoopStatistics(
            iterations=self.turns,
            events_sent=self.events_sent,
            events_dropped=self.events_dropped,
            interrupts_received=self.interrupts_received,
        )
