"""What a finished run returns: [AgentResult][juno_bind_trio.agent.AgentResult]."""

from __future__ import annotations

from typing import Any, Generic

import attrs
from typing_extensions import TypeVar

from juno_bind_trio.loop import LoopEndReason, RunStats
from juno_bind_trio.plugins import SuspendDirective

from ._approval_types import PendingToolCall
from ._events import HandoffEvent

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
    * *stats*: requests, tokens, cost, timings and tool-call counts
      ([RunStats][juno_bind_trio.loop.RunStats]): ``stats.model_calls`` is
      every model request the run made, structured-output re-asks included.
    * *run_id*, *iterations* (model turns: a turn's re-asks are part of it),
      *suspensions* (for a ``"suspended"`` run, the directives in call order).
    * *pending*: for a ``"suspended"`` run, the calls waiting for a decision
      or for the host's result ([PendingToolCall][juno_bind_trio.agent.PendingToolCall]);
      continue with ``approvals=``, ``results=``, ``errors=``.
    * *agent_name*: the agent in charge when the run ended: the one that
      spoke last, or the target of a handoff the run stopped right after
      (``None`` for an unnamed agent with no handoff). Continue the
      conversation with that agent, or with the starting agent: a run given
      this result's *messages* goes on under the agent in charge.
    * *handoffs*: the handoffs *messages* records, in order
      ([HandoffEvent][juno_bind_trio.agent.HandoffEvent]: from, to, the
      call): the run's chain of speakers.

    [new_messages][juno_bind_trio.agent.AgentResult.new_messages] gives the
    part of *messages* this run added, without the history it was given.
    """

    output: OutputT
    messages: list[dict[str, Any]]
    reason: LoopEndReason
    stats: RunStats
    run_id: str
    iterations: int
    suspensions: tuple[SuspendDirective, ...] = ()
    # Where this run's own messages start in *messages* (see new_messages).
    _new_start: int = attrs.field(default=0, repr=False)
    pending: tuple[PendingToolCall, ...] = ()
    agent_name: str | None = None
    handoffs: tuple[HandoffEvent, ...] = ()

    def new_messages(self) -> list[dict[str, Any]]:
        """The messages this run added: from its prompt on, a new list.

        *messages* is the whole transcript: the instructions, any
        ``message_history`` the run was given, then this run. This is the
        run's own part: its prompt, the model's turns and the tools' answers,
        for a host that keeps the conversation itself and appends each run's
        messages to it. (The instructions' system message, inserted before the
        history, is not part of it.)

        For a run continued by [resume][juno_bind_trio.agent.Agent.resume]
        it is what the resume added after the stored transcript it loaded:
        the answers to the interrupted turn's calls (by receipt or by running
        them), then every later turn; ``[]`` when the stored run had already
        answered everything. The part before the crash is in *messages*.
        """
        return list(self.messages[self._new_start :])
