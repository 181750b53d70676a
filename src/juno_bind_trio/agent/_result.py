"""What a finished run returns: [AgentResult][juno_bind_trio.agent.AgentResult]."""

from __future__ import annotations

from typing import Any, Generic

import attrs
from typing_extensions import TypeVar

from juno_bind_trio.loop import LoopEndReason, RunStats
from juno_bind_trio.plugins import SuspendDirective

__all__ = ["AgentResult", "OutputT"]

OutputT = TypeVar("OutputT", default=str)


@attrs.frozen(kw_only=True)
class AgentResult(Generic[OutputT]):
    """How a run ended, what it answered, and everything it said on the way.

    * *output*: the answer, typed per the agent's ``output_type``: the final
      text for ``str``; the validated value for a structured type. When the
      run did not complete (*reason* other than ``"completed"``) there is no
      final answer: *output* is the last text for ``str``, ``None`` otherwise.
    * *messages*: the whole transcript (instructions, history, this run),
      JSON-serialisable; pass it as ``message_history=`` to go on.
    * *reason*: the loop's [LoopEndReason][juno_bind_trio.loop.LoopEndReason].
    * *stats*: tokens, cost, timings and tool-call counts
      ([RunStats][juno_bind_trio.loop.RunStats]).
    * *run_id*, *iterations* (model calls), *suspensions* (for a
      ``"suspended"`` run, the directives in call order).
    """

    output: OutputT
    messages: list[dict[str, Any]]
    reason: LoopEndReason
    stats: RunStats
    run_id: str
    iterations: int
    suspensions: tuple[SuspendDirective, ...] = ()
