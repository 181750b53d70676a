"""The ``message_history`` a run goes on from, checked message by message before any request.

A transcript passed back in is usually an earlier ``AgentResult.messages``,
but it is also what a host loads from its own storage, edits, or builds by
hand, and a malformed message there is found by the provider as a 400 at the
first request, naming nothing the host can find. Each message is checked
here against the chat shape the provider reads, and refused naming
``message_history[i]`` and what is wrong with it: a ``TypeError`` for a value
of the wrong type, a ``ValueError`` for a wrong value. What is well formed
is then healed (every tool call answered exactly once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from juno_bind_trio._validate import shown
from juno_bind_trio.transcript import heal_transcript

__all__ = ["check_message_history", "on_conversation"]

_ROLES: Final = ("system", "developer", "user", "assistant", "tool")
_MISSING: Final = object()
# The part types a message of each role may hold, beyond a user's (any part).
_TEXT_KINDS: Final = {"assistant": ("text", "refusal")}


def check_message_history(owner: str, given: object) -> list[Mapping[str, Any]]:
    """*given*, checked as a list of chat messages; raises naming ``message_history[i]``."""
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise TypeError(
            f"{owner}: message_history must be a list of messages (an earlier "
            f"AgentResult.messages), got {shown(given)}"
        )
    messages: list[Mapping[str, Any]] = []
    for index, message in enumerate(given):
        _check_message(f"{owner}: message_history[{index}]", message)
        messages.append(message)
    return messages


def _check_message(where: str, message: object) -> None:
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a chat message dict, got {shown(message)}")
    role = message.get("role")
    if not isinstance(role, str):
        raise TypeError(f"{where} must have a string 'role', got {shown(role)}")
    if role not in _ROLES:
        raise ValueError(f"{where} has role {shown(role)}; expected one of {', '.join(_ROLES)}")
    content = message.get("content", _MISSING)
    if role == "assistant":
        if content is not _MISSING and content is not None:
            _check_content(where, role, content)
        _check_calls(where, message.get("tool_calls"))
        return
    if content is _MISSING or content is None:
        raise TypeError(f"{where} is a {role} message with no content")
    _check_content(where, role, content)
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise TypeError(
                f"{where} is a tool message whose tool_call_id is not a non-empty string: "
                f"{shown(call_id)}"
            )


def _check_content(where: str, role: str, content: object) -> None:
    if isinstance(content, str):
        return
    if isinstance(content, str | bytes | Mapping) or not isinstance(content, Sequence):
        raise TypeError(
            f"{where}.content must be a string or a list of content parts, got {shown(content)}"
        )
    if not content:
        raise ValueError(f"{where}.content is an empty list; give it text or leave it out")
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if not isinstance(kind, str):
            raise TypeError(
                f"{where}.content[{number}] must be a content part dict with a string 'type', "
                f"got {shown(part)}"
            )
        if role != "user" and kind not in _TEXT_KINDS.get(role, ("text",)):
            allowed = " or ".join(repr(k) for k in _TEXT_KINDS.get(role, ("text",)))
            raise ValueError(
                f"{where}.content[{number}] is a {shown(kind)} part; a {role} message's parts "
                f"must be {allowed}"
            )
        if kind == "text" and not isinstance(part.get("text"), str):
            raise TypeError(
                f"{where}.content[{number}] is a text part whose 'text' is not a string: "
                f"{shown(part.get('text'))}"
            )


def _check_calls(where: str, calls: object) -> None:
    if calls is None:
        return
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
        raise TypeError(f"{where}.tool_calls must be a list of tool calls, got {shown(calls)}")
    seen: set[str] = set()
    for number, call in enumerate(calls):
        at = f"{where}.tool_calls[{number}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if (
            not isinstance(call_id, str)
            or not call_id
            or not isinstance(function, Mapping)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str)
        ):
            raise TypeError(
                f"{at} must be a tool call dict with a non-empty string 'id' and a 'function' "
                f"with string 'name' and 'arguments', got {shown(call)}"
            )
        if call_id in seen:
            raise ValueError(f"{where}.tool_calls has two calls with id {shown(call_id)}")
        seen.add(call_id)


def on_conversation(
    history: list[dict[str, Any]], own: list[dict[str, Any]], new_start: int
) -> tuple[list[dict[str, Any]], int]:
    """A run's first transcript on a conversation, and where its own part starts.

    *history* is the conversation's (healed here, as a ``message_history`` is);
    *own* the run's messages without one: its instructions (before *new_start*),
    then its prompt. The agent's instructions, if it has any, take the place of
    the history's leading system message: a conversation speaks under the
    agent's instructions of today, not those of its first run.
    """
    healed = heal_transcript(history).messages
    head, tail = own[:new_start], own[new_start:]
    if head and healed and healed[0].get("role") == "system":
        healed = healed[1:]
    messages = [*head, *healed]
    return [*messages, *tail], len(messages)
