"""Compaction: old turns summarized through a model call, on the loop's compaction arm.

``Agent(compaction=Compaction(...))`` gives the run's
[ToolLoop][juno_bind_trio.loop.ToolLoop] its ``needs_compaction`` and
``apply_compaction`` ports. At the end of an iteration whose context grew
past the trigger, the loop reports a ``"compacting"`` status and awaits the
rewrite: everything before the last *keep_turns* model turns is sent to a
model with the instructions to summarize it, and replaced in the transcript
by one system message holding the summary. Unlike a history processor, this
changes what the run keeps (``AgentResult.messages`` then starts from the
summary), which is what lets a long run go on past the model's context.

The cut is made at the start of a model turn (an assistant message), so no
tool call is parted from its answer; the system messages and the last user
message are kept as they were, and an earlier summary is summarized again
with the rest. A summary that comes back empty, or a model that fails,
leaves the transcript as it was: compaction is an economy, and a run must
not end because of it (the model's error is logged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._validate import is_async_callable, shown
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

if TYPE_CHECKING:
    from ._run import _RunCore

__all__ = ["DEFAULT_COMPACTION_INSTRUCTIONS", "SUMMARY_PREFIX", "Compaction", "compaction_ports"]

DEFAULT_COMPACTION_INSTRUCTIONS: Final = (
    "Summarize the conversation above for your own later use: the user's goal, what was "
    "decided, what each tool call found (names, numbers, identifiers), and what is still to "
    "do. Write only the summary."
)
"""What the summarizing request asks unless ``Compaction(instructions=...)`` says otherwise."""

SUMMARY_PREFIX: Final = "Summary of the earlier conversation:\n"
"""How the system message holding a summary begins (and how a later compaction finds it)."""


def _positive_or_none(name: str) -> Callable[[Any, Any, Any], None]:
    def check(_self: Any, _field: Any, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"Compaction: {name} must be a positive integer or None, got {shown(value)}"
            )
        if value < 1:
            raise ValueError(
                f"Compaction: {name} must be a positive integer or None, got {value!r}"
            )

    return check


def _check_keep(_self: Any, _field: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Compaction: keep_turns must be a positive integer, got {shown(value)}")
    if value < 1:
        raise ValueError(f"Compaction: keep_turns must be a positive integer, got {value!r}")


def _check_model(_self: Any, _field: Any, value: Any) -> None:
    if value is not None and not is_async_callable(value):
        raise TypeError(
            "Compaction: model must be an async function (ModelTurn) -> ModelTurnResult "
            f"(testing.TestModel, FunctionModel, an OpenAIChatModel) or None, got {shown(value)}"
        )


def _check_instructions(_self: Any, _field: Any, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"Compaction: instructions must be a non-empty str, got {shown(value)}")


@attrs.frozen(kw_only=True)
class Compaction:
    """When and how an [Agent][juno_bind_trio.agent.Agent]'s runs summarize their old turns.

    ```python
    agent = Agent(model, tools=tools, compaction=Compaction(max_context_tokens=60_000))
    ```

    * *max_context_tokens*: compact after a model turn whose context (its
      input plus output tokens, as the provider reported them) reached this.
    * *max_turns*: compact once the transcript holds more than this many
      model turns (for a model that reports no usage, or a fixed budget).
      At least one of the two triggers must be given.
    * *keep_turns*: the last model turns kept as they are (2).
    * *model*: the model that writes the summary (a cheaper one, say); the
      run's own model by default.
    * *instructions*: what the summarizing request asks for.

    A compaction shows as a ``StatusEvent(iteration, "compacting")`` in the
    loop's events and counts in ``RunStats.compactions``; its request counts
    in the run's requests and usage.
    """

    max_context_tokens: int | None = attrs.field(
        default=None, validator=_positive_or_none("max_context_tokens")
    )
    max_turns: int | None = attrs.field(default=None, validator=_positive_or_none("max_turns"))
    keep_turns: int = attrs.field(default=2, validator=_check_keep)
    model: Callable[[ModelTurn], Awaitable[ModelTurnResult]] | None = attrs.field(
        default=None, validator=_check_model, repr=False
    )
    instructions: str = attrs.field(
        default=DEFAULT_COMPACTION_INSTRUCTIONS, validator=_check_instructions, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if self.max_context_tokens is None and self.max_turns is None:
            raise ValueError(
                "Compaction: give max_context_tokens or max_turns (or both): when to compact"
            )


def _turn_starts(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def _is_summary(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "system"
        and isinstance(content, str)
        and content.startswith(SUMMARY_PREFIX)
    )


def compaction_ports(
    core: _RunCore[Any], compaction: Compaction | None
) -> tuple[Callable[[int], bool] | None, Callable[[], Awaitable[None]] | None]:
    """The loop's ``needs_compaction`` and ``apply_compaction`` for one run (none without one)."""
    if compaction is None:
        return None, None

    def needs_compaction(context_tokens: int) -> bool:
        limit = compaction.max_context_tokens
        if limit is not None and context_tokens >= limit:
            return True
        turns = compaction.max_turns
        return turns is not None and len(_turn_starts(core.state.messages)) > turns

    async def apply_compaction() -> None:
        messages = core.state.messages
        starts = _turn_starts(messages)
        if len(starts) <= compaction.keep_turns:
            return  # nothing old enough to summarize
        cut = starts[-compaction.keep_turns]
        # Its own model, or the agent in charge's (a handoff's target's, after one).
        model = compaction.model or (
            core.model if core.handover is None else await core.handover.model()
        )
        assert model is not None
        asked = ModelTurn(
            iteration=core.iteration,
            turn_id=f"{core.run_id}:{core.iteration}:compaction",
            messages=[*messages[:cut], {"role": "user", "content": compaction.instructions}],
            tools=(),
            text_stream=None,
            emit=lambda _event: None,
        )
        try:
            answer = await model(asked)
        except Exception:
            # An economy that failed: the run goes on with its whole transcript.
            _tracing.logger.warning(
                "run %s: compaction's summary request failed; the transcript is kept whole",
                core.run_id,
                exc_info=True,
            )
            return
        if not isinstance(answer, ModelTurnResult):
            raise TypeError(
                f"Compaction: the model returned {shown(answer)}, not a ModelTurnResult"
            )
        core.extra.requests += 1
        core.extra.spend(answer, core.meter)
        summary = (answer.content or "").strip()
        if not summary:
            return
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        kept_before = [
            i
            for i in range(cut)
            if (messages[i].get("role") in ("system", "developer") and not _is_summary(messages[i]))
            or i == last_user
        ]
        # The summary goes after the leading system messages, before the rest.
        leading = [i for i in kept_before if messages[i].get("role") in ("system", "developer")]
        later = [i for i in kept_before if i not in leading]
        rebuilt: list[dict[str, Any]] = [messages[i] for i in leading]
        summary_at = len(rebuilt)
        rebuilt.append({"role": "system", "content": SUMMARY_PREFIX + summary})
        origins = [*leading, -1, *later, *range(cut, len(messages))]
        rebuilt.extend(messages[i] for i in later)
        rebuilt.extend(messages[cut:])
        # new_messages: this run's part, where it still is (the summary, if it replaced some).
        start = core.new_start
        if any(start <= i < cut and i not in kept_before for i in range(cut)):
            core.new_start = summary_at
        else:
            core.new_start = next((n for n, i in enumerate(origins) if i >= start), len(rebuilt))
        messages[:] = rebuilt  # in place: the loop and the session hold this list

    return needs_compaction, apply_compaction
