"""History processors: shape what each model request is sent, never what the run keeps.

``Agent(history_processors=[...])`` runs its functions, in order, on the
messages of every model request; the request is sent what the last one
returns, and ``AgentResult.messages`` keeps the whole transcript.

Trimming a history is where tool-call pairs get broken: cut between an
assistant message and the answers to its calls, and the provider refuses the
request with a 400 that names a message index the host never saw. So what
each processor returns is checked before anything is sent, by
``check_sent_history()``: every call of an assistant message answered by
the tool messages right after it, no answer without its call, and the last
user message of the request kept as it was (a request without the question
it answers is a bug, not a saving). A history that breaks a rule raises
[UsageError][juno_bind_trio.UsageError] naming the processor and the message,
and no request is made.

The two ready-made processors cut at model turns (an assistant message and
the tool answers to its calls), so they cannot break a pair:
[keep_last_turns][juno_bind_trio.agent.keep_last_turns] and
[drop_old_tool_results][juno_bind_trio.agent.drop_old_tool_results].
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs

from juno_bind_trio._errors import UsageError
from juno_bind_trio._json import json_copy
from juno_bind_trio._validate import shown

if TYPE_CHECKING:
    from ._context import RunContext

__all__ = [
    "DEFAULT_TOOL_RESULT_MARKER",
    "HistoryProcessor",
    "Processors",
    "check_processors",
    "check_sent_history",
    "drop_old_tool_results",
    "keep_last_turns",
    "run_processors",
]

HistoryProcessor: TypeAlias = Callable[..., Any]
"""``(messages) -> messages`` or ``(ctx, messages) -> messages``, sync or async."""

DEFAULT_TOOL_RESULT_MARKER: Final = "[tool result removed to save space]"
"""What [drop_old_tool_results][juno_bind_trio.agent.drop_old_tool_results] leaves in place
of an old tool result unless told otherwise."""


def _label(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _takes_context(owner: str, index: int, fn: object) -> bool:
    """Whether a processor takes ``(ctx, messages)`` rather than ``(messages)``."""
    try:
        signature = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False  # a builtin or the like: given the messages alone
    parameters = signature.parameters.values()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) == 2:
        return True
    if len(required) == 1 or (
        not required and (positional or any(p.kind is p.VAR_POSITIONAL for p in parameters))
    ):
        return False
    raise TypeError(
        f"{owner}: history_processors[{index}] ({_label(fn)}) must take (messages) or "
        f"(ctx, messages), got the signature {signature}"
    )


@attrs.frozen
class Processors:
    """An agent's history processors, each with whether it takes the run's context."""

    entries: tuple[tuple[HistoryProcessor, bool], ...]


def check_processors(owner: str, given: object) -> Processors | None:
    """*given* as an agent's processors: a list of functions, or ``None`` / empty."""
    if given is None:
        return None
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise TypeError(
            f"{owner}: history_processors must be a list of functions of (messages) or "
            f"(ctx, messages), got {shown(given)}"
        )
    entries: list[tuple[HistoryProcessor, bool]] = []
    for index, fn in enumerate(given):
        if not callable(fn):
            raise TypeError(
                f"{owner}: history_processors[{index}] must be a function of (messages) or "
                f"(ctx, messages), got {shown(fn)}"
            )
        entries.append((fn, _takes_context(owner, index, fn)))
    return Processors(tuple(entries)) if entries else None


def _last_user(messages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            found: Mapping[str, Any] = message
            return found
    return None


def check_sent_history(
    who: str, sent: object, last_user: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """*sent*, a processor's return, checked as a request's history; raises naming *who*.

    The tool-call rules of the chat completions API (see the module
    docstring), and *last_user* (the request's last user message before any
    processor) present and unchanged.
    """
    if isinstance(sent, str | bytes | Mapping) or not isinstance(sent, Sequence):
        raise UsageError(f"{who} must return a list of chat messages, got {shown(sent)}")
    if not sent:
        raise UsageError(f"{who} returned no messages; a request needs at least its prompt")
    checked: list[dict[str, Any]] = []
    waiting: dict[str, int] = {}  # the open assistant message's unanswered call ids
    opened_at = -1
    for index, message in enumerate(sent):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise UsageError(
                f"{who} returned {shown(message)} at [{index}], not a chat message dict with "
                "a string 'role'"
            )
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in waiting:
                raise UsageError(
                    f"{who} broke a tool-call pair: message [{index}] answers tool call "
                    f"{call_id!r}, which the assistant message before its block did not make "
                    "(or it was answered already)"
                )
            del waiting[call_id]
        else:
            if waiting:
                raise UsageError(
                    f"{who} broke a tool-call pair: tool call {next(iter(waiting))!r} of the "
                    f"assistant message at [{opened_at}] has no answer before message [{index}]"
                )
            if role == "assistant":
                calls = message.get("tool_calls") or ()
                if not isinstance(calls, list | tuple):
                    raise UsageError(
                        f"{who} returned an assistant message at [{index}] whose tool_calls is "
                        f"{shown(calls)}, not a list of calls"
                    )
                ids = [c.get("id") if isinstance(c, Mapping) else None for c in calls]
                waiting = {str(call_id): 0 for call_id in ids}
                opened_at = index
        checked.append(dict(message))
    if waiting:
        raise UsageError(
            f"{who} broke a tool-call pair: tool call {next(iter(waiting))!r} of the assistant "
            f"message at [{opened_at}] has no answer (the history ends before it)"
        )
    if last_user is not None and _last_user(checked) != last_user:
        raise UsageError(
            f"{who} dropped or changed the last user message ({shown(last_user.get('content'))}); "
            "the request would not carry what the model is asked"
        )
    return checked


async def run_processors(
    processors: Processors,
    messages: Sequence[Mapping[str, Any]],
    context: Callable[[], RunContext[Any]],
) -> list[dict[str, Any]]:
    """What a request is sent: *messages* through every processor, each result checked."""
    last_user = _last_user(messages)
    # Deep copies: a processor that edits a message in place, down to a tool call's
    # arguments or a part of its content, edits the request, not the run.
    current: list[dict[str, Any]] = [{k: json_copy(v) for k, v in m.items()} for m in messages]
    for index, (fn, takes_context) in enumerate(processors.entries):
        got = fn(context(), current) if takes_context else fn(current)
        if inspect.isawaitable(got):
            got = await got
        current = check_sent_history(
            f"Agent.run: history_processors[{index}] ({_label(fn)})", got, last_user
        )
    return current


# --- the ready-made ones -------------------------------------------------------------


def _turn_starts(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def _positive(owner: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{owner}: n must be a positive integer, got {shown(n)}")
    if n < 1:
        raise ValueError(f"{owner}: n must be a positive integer, got {n!r}")
    return n


def keep_last_turns(n: int) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """A history processor that sends only the last *n* model turns, with their tool pairs.

    A model turn is an assistant message and the tool answers to its calls.
    What is sent: the system (and developer) messages before the kept turns,
    the last user message if it is older than them, and everything from the
    *n*-th last assistant message on, in order. Cut at a turn's start, no
    call is ever parted from its answer.

    ```python
    agent = Agent(model, history_processors=[keep_last_turns(4)])
    ```
    """
    count = _positive("keep_last_turns", n)

    def keep_last_turns_processor(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        starts = _turn_starts(messages)
        if len(starts) <= count:
            return messages
        cut = starts[-count]
        last_user = None
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].get("role") == "user":
                last_user = index
                break
        head = [
            m
            for i, m in enumerate(messages[:cut])
            if m.get("role") in ("system", "developer") or i == last_user
        ]
        return [*head, *messages[cut:]]

    keep_last_turns_processor.__qualname__ = f"keep_last_turns({count})"
    return keep_last_turns_processor


def drop_old_tool_results(
    n: int, *, marker: str = DEFAULT_TOOL_RESULT_MARKER
) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """A history processor that replaces the tool results older than the last *n* model turns.

    Every tool message answering a call of an assistant message before the
    *n*-th last one is sent with *marker* as its content; the calls and
    their answers stay where they are, so every pair is whole, and the model
    still sees which tools it called with which arguments.

    ```python
    agent = Agent(model, history_processors=[drop_old_tool_results(2)])
    ```
    """
    count = _positive("drop_old_tool_results", n)
    if not isinstance(marker, str):
        raise TypeError(f"drop_old_tool_results: marker must be a str, got {shown(marker)}")

    def drop_old_tool_results_processor(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        starts = _turn_starts(messages)
        if len(starts) <= count:
            return messages
        cut = starts[-count]
        return [
            {**m, "content": marker} if i < cut and m.get("role") == "tool" else m
            for i, m in enumerate(messages)
        ]

    drop_old_tool_results_processor.__qualname__ = f"drop_old_tool_results({count})"
    return drop_old_tool_results_processor
