"""The handoff record a transcript carries: who handed the run to whom, and who is in charge.

A handoff is recorded in the transcript itself, as the answer to the handoff
call: a tool message whose content is ``{"transferred_to": ..., "transferred_from":
...}``, with ``"in_charge": true`` once the target took over (its
instructions in place). Everything that needs to know who speaks reads it
here: the agent (a resumed or continued run goes on under the agent in
charge), the store (its run record names that agent) and the web view. The
format is plain data, so this module sits below every layer and imports
nothing of the package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

__all__ = [
    "LastHandoff",
    "all_handoffs",
    "in_charge",
    "last_handoff",
    "switched_content",
    "transfer_content",
]

_TO: Final = "transferred_to"
_FROM: Final = "transferred_from"
_MADE: Final = "in_charge"


def transfer_content(from_agent: str | None, to_agent: str) -> str:
    """The handoff call's answer: what the model reads, and the run's record of the transfer."""
    return json.dumps({_TO: to_agent, _FROM: from_agent}, separators=(",", ":"))


def switched_content(content: str) -> str:
    """The answer once the switch is made (the target in charge): so a resume knows."""
    data = json.loads(content)
    data[_MADE] = True
    return json.dumps(data, separators=(",", ":"))


@attrs.frozen
class LastHandoff:
    """The last handoff a transcript records: who to whom, by which call, and where."""

    from_agent: str | None
    to_agent: str
    call_id: str
    tool_name: str
    # Whether the switch is made: the target's instructions, tools and history in place.
    switched: bool


def _marker(message: Mapping[str, Any]) -> tuple[str | None, str, bool] | None:
    if message.get("role") != "tool":
        return None
    content = message.get("content")
    if not isinstance(content, str) or not content.startswith("{") or _TO not in content:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict) or not {_TO, _FROM} <= set(data) <= {_TO, _FROM, _MADE}:
        return None
    to, frm = data[_TO], data[_FROM]
    if not isinstance(to, str) or not (frm is None or isinstance(frm, str)):
        return None
    return frm, to, data.get(_MADE) is True


def all_handoffs(messages: Sequence[Mapping[str, Any]]) -> list[LastHandoff]:
    """Every handoff *messages* records, in order."""
    found: list[LastHandoff] = []
    calls: dict[str, tuple[int, str]] = {}  # call id: (its turn's index, its tool)
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            listed = message.get("tool_calls")
            for call in listed if isinstance(listed, list | tuple) else ():
                if not isinstance(call, Mapping):
                    continue  # not a call: a transcript read as it is, never refused here
                function = call.get("function")
                name = function.get("name") if isinstance(function, Mapping) else None
                if isinstance(call.get("id"), str) and isinstance(name, str):
                    calls[call["id"]] = (index, name)
            continue
        marked = _marker(message)
        call_id = message.get("tool_call_id")
        if marked is None or not isinstance(call_id, str) or call_id not in calls:
            continue
        found.append(LastHandoff(marked[0], marked[1], call_id, calls[call_id][1], marked[2]))
    return found


def last_handoff(messages: Sequence[Mapping[str, Any]]) -> LastHandoff | None:
    """The last handoff *messages* records, or ``None``."""
    found = all_handoffs(messages)
    return found[-1] if found else None


def in_charge(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The name of the agent in charge at the end of *messages*, or ``None`` when they
    record no handoff: the target of the last handoff once the switch is made, the agent
    that handed off while that handoff's batch is still open.

    The store reads it at every transcript it saves, so it looks from the end for the
    last marker and only then for its call: ``last_handoff``'s answer, without a record
    of every call on the way.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        marked = _marker(message)
        call_id = message.get("tool_call_id")
        if marked is None or not isinstance(call_id, str):
            continue
        if any(_makes_call(earlier, call_id) for earlier in messages[:index]):
            return marked[1] if marked[2] else marked[0]
    return None


def _makes_call(message: Mapping[str, Any], call_id: str) -> bool:
    """Whether *message* is an assistant turn with a named call *call_id* (as
    ``all_handoffs`` counts a call)."""
    if message.get("role") != "assistant":
        return False
    listed = message.get("tool_calls")
    for call in listed if isinstance(listed, list | tuple) else ():
        if isinstance(call, Mapping) and call.get("id") == call_id:
            function = call.get("function")
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                return True
    return False
