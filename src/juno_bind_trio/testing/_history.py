"""The tool-call history rules of OpenAI's Chat Completions API, checked the way the API does.

A chat-completions request whose ``messages`` break the pairing of tool calls
and their answers is refused by the real API with a 400 before any model
runs. A test double that accepts them hides exactly the bug a resumed or
healed transcript is most likely to have, so the fake server checks the same
rules (see [check_tool_call_history][juno_bind_trio.testing.check_tool_call_history])
and refuses with the real API's words where they are known.

The rules, read in message order:

* every message is an object whose ``role`` is one of ``system``,
  ``developer``, ``user``, ``assistant``, ``tool`` or ``function``;
* an assistant message's ``tool_calls``, when present and not ``null``, is a
  non-empty array of calls, each with a non-empty string ``id``, no two with
  the same ``id``;
* the messages right after an assistant message with ``tool_calls`` are its
  answers: one ``tool`` message per call, each naming a ``tool_call_id`` of
  that assistant message, none answered twice, all of them before the next
  message of any other role (and before the end of the request);
* a ``tool`` message anywhere else answers nothing and is refused.

Where the API's own error texts are known they are used word for word (its
misspelling "preceeding" included), with the same ``param`` (``messages.[3].role``
for the tool-call rules, ``messages[3].role`` for the schema ones) and ``code``;
the fake server adds the message index and the ``tool_call_id`` in parentheses.

The order of the answers within their block is free, and a later assistant
message may reuse an id an earlier one used: the API pairs an answer with the
assistant message right before its block and nothing further back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from juno_bind_trio._errors import ToolCallHistoryError
from juno_bind_trio._validate import shown

__all__ = ["check_tool_call_history"]

_ROLES: Final = ("system", "assistant", "user", "function", "tool", "developer")
_SUPPORTED: Final = "'system', 'assistant', 'user', 'function', 'tool', and 'developer'"


class Fault(NamedTuple):
    """One refusal: the API's message, its ``param`` and ``code``, and where it is."""

    message: str
    param: str
    code: str | None
    at: int
    tool_call_id: str | None


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array" if isinstance(value, Sequence) else type(value).__name__


def _where(index: int, call_id: str | None) -> str:
    if call_id is None:
        return f" (messages[{index}])"
    return f" (messages[{index}], tool_call_id {call_id!r})"


def find_fault(messages: Sequence[Any]) -> Fault | None:
    """The first rule *messages* break, or ``None``: the server's and the checker's one reading."""
    block_at = -1  # the assistant message whose answers are being read (-1: none)
    block_calls: dict[str, int] = {}  # its call ids -> index of the answer so far (-1: none)

    def unanswered(end: int) -> Fault | None:
        missing = [call_id for call_id, answer in block_calls.items() if answer < 0]
        if not missing:
            return None
        return Fault(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(missing)}"
            f" (messages[{block_at}], answers end at messages[{end}], "
            f"tool_call_id {missing[0]!r})",
            f"messages.[{block_at}].role",
            None,
            block_at,
            missing[0],
        )

    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return Fault(
                f"Invalid type for 'messages[{index}]': expected an object, but got "
                f"{_json_type(message)} instead.",
                f"messages[{index}]",
                "invalid_type",
                index,
                None,
            )
        role = message.get("role")
        if role is None:
            return Fault(
                f"Missing required parameter: 'messages[{index}].role'.",
                f"messages[{index}].role",
                "missing_required_parameter",
                index,
                None,
            )
        if not isinstance(role, str) or role not in _ROLES:
            return Fault(
                f"Invalid value: {shown(role)}. Supported values are: {_SUPPORTED}."
                + _where(index, None),
                f"messages[{index}].role",
                "invalid_value",
                index,
                None,
            )
        if role == "tool":
            fault = _answer(messages, index, message, block_at, block_calls)
            if fault is not None:
                return fault
            continue
        fault = unanswered(index)
        if fault is not None:
            return fault
        block_at, block_calls = -1, {}
        if role == "assistant" and message.get("tool_calls") is not None:
            calls, fault = _calls(index, message["tool_calls"])
            if fault is not None:
                return fault
            block_at, block_calls = index, dict.fromkeys(calls, -1)
    return unanswered(len(messages))


def _answer(
    messages: Sequence[Any],
    index: int,
    message: Mapping[str, Any],
    block_at: int,
    block_calls: dict[str, int],
) -> Fault | None:
    call_id = message.get("tool_call_id")
    if call_id is None:
        return Fault(
            f"Missing required parameter: 'messages[{index}].tool_call_id'.",
            f"messages[{index}].tool_call_id",
            "missing_required_parameter",
            index,
            None,
        )
    if not isinstance(call_id, str):
        return Fault(
            f"Invalid type for 'messages[{index}].tool_call_id': expected a string, but got "
            f"{_json_type(call_id)} instead." + _where(index, None),
            f"messages[{index}].tool_call_id",
            "invalid_type",
            index,
            None,
        )
    if block_at < 0:
        return Fault(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'." + _where(index, call_id),
            f"messages.[{index}].role",
            None,
            index,
            call_id,
        )
    first = block_calls.get(call_id)
    if first is None:
        return Fault(
            f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of "
            f"previous message." + _where(index, call_id),
            f"messages.[{index}].tool_call_id",
            None,
            index,
            call_id,
        )
    if first >= 0:
        return Fault(
            f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}' in "
            f"messages[{first}] and messages[{index}]." + _where(index, call_id),
            f"messages.[{index}].tool_call_id",
            None,
            index,
            call_id,
        )
    block_calls[call_id] = index
    return None


def _calls(index: int, calls: object) -> tuple[list[str], Fault | None]:
    param = f"messages[{index}].tool_calls"
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
        return [], Fault(
            f"Invalid type for 'messages[{index}].tool_calls': expected an array, but got "
            f"{_json_type(calls)} instead." + _where(index, None),
            param,
            "invalid_type",
            index,
            None,
        )
    if not calls:
        return [], Fault(
            f"Invalid 'messages[{index}].tool_calls': empty array. Expected an array with "
            "minimum length 1, but got an empty array instead." + _where(index, None),
            param,
            "empty_array",
            index,
            None,
        )
    ids: list[str] = []
    for k, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(call_id, str) or not call_id:
            return [], Fault(
                f"Missing required parameter: 'messages[{index}].tool_calls[{k}].id'."
                + _where(index, None),
                f"{param}[{k}].id",
                "missing_required_parameter",
                index,
                None,
            )
        if call_id in ids:
            return [], Fault(
                f"Invalid parameter: Duplicate value for 'id' of '{call_id}' in "
                f"messages[{index}].tool_calls[{ids.index(call_id)}] and "
                f"messages[{index}].tool_calls[{k}]." + _where(index, call_id),
                f"messages.[{index}].tool_calls.[{k}].id",
                None,
                index,
                call_id,
            )
        ids.append(call_id)
    return ids, None


def check_tool_call_history(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise if OpenAI's Chat Completions API would refuse *messages*' tool-call history.

    The same check the fake server makes on every request (see
    [open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server]);
    call it on a transcript you built, loaded or resumed to assert that a real
    provider would accept it. A transcript
    [heal_transcript][juno_bind_trio.transcript.heal_transcript] returned
    always passes.

    :param messages: chat-format message dicts, in order.
    :raises ToolCallHistoryError: (a ``ValueError``) the first rule broken,
        with the API's message, the index of the message and the
        ``tool_call_id`` concerned.
    :raises TypeError: *messages* is not a list of messages.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise TypeError(
            "check_tool_call_history: messages must be a list of chat message dicts, "
            f"got {type(messages).__name__}"
        )
    fault = find_fault(messages)
    if fault is not None:
        raise ToolCallHistoryError(
            f"check_tool_call_history: {fault.message}",
            index=fault.at,
            tool_call_id=fault.tool_call_id,
            param=fault.param,
        )
