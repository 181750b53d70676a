"""The values that cross the loop's boundary: what a model turn returns, what a tool
call returns, what the run accumulates and how it ended.

All of them are frozen attrs records validated at construction, so a host that
hands the loop a malformed one hears about it where it built it, with the field
and the value named, rather than as a ``KeyError`` three iterations later.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import attrs

from juno_bind_trio._calls import ToolCall, tool_message
from juno_bind_trio._validate import error_kind, real_number, shown
from juno_bind_trio.plugins import SuspendDirective

if TYPE_CHECKING:
    from juno_bind_trio.run import ToolCallLike

__all__ = [
    "LOOP_END_REASONS",
    "LoopEndReason",
    "LoopResult",
    "LoopState",
    "ModelTurnResult",
    "RunStats",
    "SupportsMessages",
    "ToolCallOutcome",
]

LoopEndReason = Literal["completed", "max_iterations", "stopped", "suspended", "should_stop"]
"""Why [`run()`][juno_bind_trio.loop.ToolLoop.run] returned.

* ``"completed"``: the model answered without asking for a tool, and
  ``on_turn_would_end`` (if any) did not ask for another turn.
* ``"max_iterations"``: the loop made ``max_iterations`` model calls and the
  last one still asked for tools (their results are recorded and persisted).
* ``"stopped"``: the soft ``stop`` fired. Every refused call is answered
  ``not_run``; the iteration was **not** persisted.
* ``"suspended"``: a tool returned a suspend directive. Every result of the
  batch is recorded; the iteration was **not** persisted (the host records the
  suspension, and persists with it).
* ``"should_stop"``: the host's ``should_stop`` said so before a model call.

A hard cancel has no reason: ``Cancelled`` propagates instead.
"""

LOOP_END_REASONS: frozenset[str] = frozenset(
    ("completed", "max_iterations", "stopped", "suspended", "should_stop")
)
"""Every [`LoopEndReason`][juno_bind_trio.loop.LoopEndReason], for validation and exhaustive
tests."""


class SupportsMessages(Protocol):
    """What the loop needs from a host's run state: the transcript it appends to.

    ``messages`` is a ``list`` of OpenAI chat-format dicts. The loop appends
    to it (assistant messages, tool messages, interrupts) and never removes or
    rewrites what is there; compaction, which does rewrite it, is the host's
    own ``apply_compaction``.
    """

    @property
    def messages(self) -> list[dict[str, Any]]: ...


@attrs.define(eq=False)
class LoopState:
    """The smallest [`SupportsMessages`][juno_bind_trio.loop.SupportsMessages]: a transcript and
    nothing else.

    A host with its own run-state object passes that instead; anything with a
    ``messages`` list serves.
    """

    messages: list[dict[str, Any]] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.messages, list):
            raise TypeError(f"LoopState: messages must be a list, got {self.messages!r}")


# --- validators ------------------------------------------------------------------


def _count(owner: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"{owner}: {name} must be a non-negative integer, got {value!r}")
    return value


def _seconds(owner: str, name: str, value: object) -> float:
    seconds = real_number(value)
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise TypeError(f"{owner}: {name} must be a finite non-negative number, got {shown(value)}")
    return seconds


def _optional_text(owner: str, name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{owner}: {name} must be a str or None, got {value!r}")
    return value


def _tool_calls(given: Sequence[ToolCallLike] | None) -> tuple[ToolCall, ...]:
    value: object = given  # checked at run time, whatever the type says
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(
            f"ModelTurnResult: tool_calls must be a sequence of tool calls, got {value!r}"
        )
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for index, call in enumerate(value):
        # Each call read once, here, into the value every later reader takes its
        # fields from: a malformed call is the model's (or the host's
        # reassembly's) defect and must surface before the assistant message is
        # written, or the transcript holds a call nobody can answer.
        if type(call) is ToolCall:
            made = call
        else:
            try:
                made = ToolCall.of(call)
            except TypeError as exc:  # it names itself; the caller built a ModelTurnResult
                raise TypeError(f"ModelTurnResult: tool_calls[{index}]: {exc}") from None
            except ValueError:  # the one value ToolCall refuses: an empty id
                empty = f"ModelTurnResult: a tool call has an empty id: {call!r}"
                raise ValueError(empty) from None
        if made.id in seen:
            # Two answers cannot be told apart by the model, and the provider
            # rejects a transcript with either one missing.
            raise ValueError(f"ModelTurnResult: duplicate tool call id {made.id!r}")
        seen.add(made.id)
        calls.append(made)
    return tuple(calls)


_MESSAGE_KEYS: Final = frozenset({"role", "content", "tool_calls"})


def _check_extra(given: Mapping[str, Any] | None) -> dict[str, Any]:
    value: object = given  # checked at run time, whatever the type says
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"ModelTurnResult: extra must be a mapping or None, got {shown(value)}")
    extra = dict(value)
    for key in extra:
        if not isinstance(key, str):
            raise TypeError(f"ModelTurnResult: extra's keys must be str, got {shown(key)}")
        if key in _MESSAGE_KEYS:
            raise ValueError(
                f"ModelTurnResult: extra cannot hold {key!r}: it holds a provider's fields "
                "beside the message's own role, content and tool_calls"
            )
    return extra


def _check_content(value: str | None) -> str | None:
    return _optional_text("ModelTurnResult", "content", value)


def _check_reasoning(value: str | None) -> str | None:
    return _optional_text("ModelTurnResult", "reasoning", value)


def _check_input_tokens(value: int) -> int:
    return _count("ModelTurnResult", "input_tokens", value)


def _check_output_tokens(value: int) -> int:
    return _count("ModelTurnResult", "output_tokens", value)


def _check_cached_tokens(value: int) -> int:
    return _count("ModelTurnResult", "cached_tokens", value)


def _check_reasoning_tokens(value: int) -> int:
    return _count("ModelTurnResult", "reasoning_tokens", value)


def _check_cost(value: float) -> float:
    return _seconds("ModelTurnResult", "cost", value)


def _check_ttft(value: float | None) -> float | None:
    return None if value is None else _seconds("ModelTurnResult", "time_to_first_token", value)


# --- a model turn ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ModelTurnResult:
    """What ``call_model`` returns for one turn: the assistant message, its usage and timings.

    *content* is the assistant text (``None`` when the turn only called
    tools); *tool_calls* the calls it asked for, in either shape
    [`ToolCallLike`][juno_bind_trio.run.ToolCallLike] accepts, each read here
    once into the [`ToolCall`][juno_bind_trio.run.ToolCall] every later reader
    takes its fields from (a ``ToolCall`` is kept as it is; every call well
    formed, ids non-empty and unique); *reasoning* the model's thinking, if
    the host wants it on the events channel. *extra* holds fields a provider
    put on the assistant message that must go back with it
    (``reasoning_content``): the loop writes them into the transcript's
    assistant message, after its own.

    Usage: *input_tokens* (the prompt, i.e. the context the turn saw, cached
    or not), *output_tokens* (reasoning included), *cost* in whatever currency
    the host bills in; of those, *cached_tokens* of the input were read from
    the provider's prompt cache and *reasoning_tokens* of the output were the
    model's thinking. Every provider adapter reports them so normalized, so a
    limit or a bill means the same whichever provider answered.
    *time_to_first_token* is the host's measurement, in seconds, if it has one;
    the loop measures the turn's whole duration itself.
    """

    content: str | None = attrs.field(default=None, converter=_check_content)
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    reasoning: str | None = attrs.field(default=None, converter=_check_reasoning)
    input_tokens: int = attrs.field(default=0, converter=_check_input_tokens)
    output_tokens: int = attrs.field(default=0, converter=_check_output_tokens)
    cost: float = attrs.field(default=0.0, converter=_check_cost)
    cached_tokens: int = attrs.field(default=0, converter=_check_cached_tokens)
    reasoning_tokens: int = attrs.field(default=0, converter=_check_reasoning_tokens)
    time_to_first_token: float | None = attrs.field(default=None, converter=_check_ttft)
    extra: dict[str, Any] = attrs.field(factory=dict, converter=_check_extra)

    @property
    def context_tokens(self) -> int:
        """The context the *next* turn starts from, approximately: this turn's input plus output.

        What ``needs_compaction`` is asked about.
        """
        return self.input_tokens + self.output_tokens


# --- a tool call ----------------------------------------------------------------------


def _tool_message(given: Mapping[str, Any]) -> dict[str, Any]:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, Mapping):
        raise TypeError(f"ToolCallOutcome: tool_message must be a mapping, got {value!r}")
    if value.get("role") != "tool":
        raise ValueError(f"ToolCallOutcome: tool_message must have role 'tool', got {value!r}")
    call_id = value.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(
            f"ToolCallOutcome: tool_message needs a non-empty str tool_call_id, got {value!r}"
        )
    if not isinstance(value.get("content"), (str, list)):
        raise TypeError(
            f"ToolCallOutcome: tool_message content must be a str or a list of parts, got {value!r}"
        )
    return dict(value)


def _suspend(given: SuspendDirective | None) -> SuspendDirective | None:
    value: object = given  # checked at run time, whatever the type says
    if value is not None and not isinstance(value, SuspendDirective):
        raise TypeError(
            f"ToolCallOutcome: suspend must be a SuspendDirective or None, got {value!r}"
        )
    return value


def _name(field_name: str, value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise error_kind(value, str)(
            f"ToolCallOutcome: {field_name} must be a non-empty str or None, got {value!r}"
        )
    return value


def _check_plugin(value: str | None) -> str | None:
    return _name("activated_plugin", value)


def _check_skill(value: str | None) -> str | None:
    return _name("activated_skill", value)


def _flag(given: bool) -> bool:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, bool):
        raise TypeError(f"ToolCallOutcome: request_compaction must be a bool, got {value!r}")
    return value


@attrs.frozen(kw_only=True)
class ToolCallOutcome:
    """What ``run_tool_call`` returns for a call that ran: the answer and what it asks of the run.

    * *tool_message*: the ``{"role": "tool", "tool_call_id": ..., "content":
      ...}`` dict the loop appends. Its ``tool_call_id`` must be the call's.
    * *request_compaction*: compact the context before the next model call,
      whatever the token count says.
    * *suspend*: end the run as ``"suspended"`` after this batch (a human has
      to answer first). Every other result of the batch is still recorded.
    * *activated_plugin* / *activated_skill*: a name handed, after the batch,
      to the loop's ``activate_plugins`` / ``activate_skills`` so the next
      turn sees it.

    A tool that *failed* should raise, not return: the loop turns the
    exception into the ``{"success": false, ...}`` envelope and reports it.
    """

    tool_message: dict[str, Any] = attrs.field(converter=_tool_message)
    request_compaction: bool = attrs.field(default=False, converter=_flag)
    suspend: SuspendDirective | None = attrs.field(default=None, converter=_suspend)
    activated_plugin: str | None = attrs.field(default=None, converter=_check_plugin)
    activated_skill: str | None = attrs.field(default=None, converter=_check_skill)

    @classmethod
    def from_content(
        cls,
        tool_call_id: str,
        content: str,
        *,
        request_compaction: bool = False,
        suspend: SuspendDirective | None = None,
        activated_plugin: str | None = None,
        activated_skill: str | None = None,
    ) -> ToolCallOutcome:
        """Build the outcome whose tool message answers *tool_call_id* with *content*."""
        return cls(
            tool_message=tool_message(tool_call_id, content),
            request_compaction=request_compaction,
            suspend=suspend,
            activated_plugin=activated_plugin,
            activated_skill=activated_skill,
        )

    @property
    def tool_call_id(self) -> str:
        """The id the tool message answers."""
        call_id: str = self.tool_message["tool_call_id"]
        return call_id


# --- the run ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunStats:
    """What a run has cost so far. Frozen; the loop replaces it as it goes.

    *model_calls* counts requests: the loop counts one per turn (a call of
    ``call_model``); an [Agent][juno_bind_trio.agent.Agent] adds each
    structured-output re-ask it makes inside a turn, so its
    ``AgentResult.stats.model_calls`` is every request the run made (its
    ``iterations`` counts the turns). A provider's own retries and fallbacks
    inside one request are not counted here (the route's attempts record
    them). Tokens and cost are summed from each
    [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult] (an Agent adds the
    answers its re-asks replaced). *compactions* counts transcript rewrites.
    Timings are measured by the loop on the current clock: *model_seconds* across model
    calls, *tool_seconds* across tool batches (serial phase and pool, wall
    time, not the sum of the calls). Tool calls are counted by how they were
    answered: *tool_calls* all of them, *tool_failures* those that ran and
    raised, *tool_calls_not_run* those refused by the stop or never reached,
    *tool_calls_interrupted* those a hard cancel cut off.
    *text_sink_errors* counts the turn text events whose sink raised (a
    closed reader, a full transport), summed over the run's turns: non-zero
    means some reader is out of step (each turn's count also arrives as a
    [TextSinkErrorsEvent][juno_bind_trio.loop.TextSinkErrorsEvent]).
    *cached_tokens* and *reasoning_tokens* are the parts of the input and
    output tokens each provider reports as read from its prompt cache and as
    thinking (already counted in *input_tokens* / *output_tokens*).

    ``a + b`` sums two records, for a host that folds sub-agent runs into its own.
    """

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    tool_calls: int = 0
    tool_failures: int = 0
    tool_calls_not_run: int = 0
    tool_calls_interrupted: int = 0
    compactions: int = 0
    text_sink_errors: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: object) -> RunStats:
        if not isinstance(other, RunStats):
            return NotImplemented
        return RunStats(
            **{
                f.name: getattr(self, f.name) + getattr(other, f.name)
                for f in attrs.fields(RunStats)
            }
        )


@attrs.frozen(kw_only=True)
class LoopResult:
    """How a run ended: *reason*, the number of model calls (*iterations*), the *stats*.

    *iterations* counts the loop's own model calls (a loop started at
    ``first_iteration=k`` that made three ends with ``iterations == 3``).

    *content* is the last assistant message's text (the answer, for a
    ``"completed"`` run); *suspensions* the directives of a ``"suspended"``
    run, in call order.
    """

    reason: LoopEndReason
    iterations: int
    stats: RunStats
    content: str | None = None
    suspensions: tuple[SuspendDirective, ...] = ()
