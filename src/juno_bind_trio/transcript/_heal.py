"""Transcript healing: make a stored or interrupted transcript acceptable to a provider again.

Every chat-completions provider enforces one structural rule on a transcript:
an assistant message that calls tools must be followed, immediately, by one
tool message per call — each answering one ``tool_call_id`` — before anything
else is said. A transcript breaks that rule in a handful of ordinary ways:

* the run was cancelled (or the process died) between the assistant message
  and its answers, so some calls *dangle*;
* a host appended a user message, or a system note, while a batch was still
  running, and the answers landed after it;
* a retry wrote an answer twice, or a merge kept a tool message whose call
  was edited away (an *orphan*).

A provider answers each of these with a 400 and the run cannot continue, not
even to tell the user what happened. Healing repairs exactly the rule and
nothing else: it adds an answer where one is missing (saying honestly that the
call's effect is unknown, or that it never started), moves a real answer up to
sit beside its call, drops a tool message that answers nothing, and removes an
empty ``tool_calls`` list, which the API refuses as it stands. It never
writes user or assistant content, never reorders user, assistant or system
messages, and reports every change it made so a host can log or audit it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

import attrs

from juno_bind_trio._calls import tool_message
from juno_bind_trio._errors import (
    ABORTED_TOOL_CALL_MESSAGE,
    INTERRUPTED_TOOL_CALL_MESSAGE,
    TranscriptError,
)
from juno_bind_trio._failures import tool_failure_message
from juno_bind_trio._validate import shown

__all__ = ["HealAction", "HealChange", "HealResult", "heal_transcript"]

HealAction = Literal[
    "synthesized", "moved", "dropped_orphan", "dropped_duplicate", "removed_empty_tool_calls"
]
"""What healing did to one tool answer (see
[`HealChange`][juno_bind_trio.transcript.HealChange])."""

_ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
# ``function`` is the legacy function-calling role: kept as it is and, like
# ``user`` or ``system``, it ends an assistant message's block of answers.

_SYNTHESIZED_ERRORS: Final[Mapping[str, str]] = {
    "interrupted": INTERRUPTED_TOOL_CALL_MESSAGE,
    "not_run": ABORTED_TOOL_CALL_MESSAGE,
}


@attrs.frozen(kw_only=True)
class HealChange:
    """One change [`heal_transcript()`][juno_bind_trio.transcript.heal_transcript] made, with the
    positions needed to audit it.

    ``action`` is one of:

    ``"synthesized"``
        A call had no answer; a tool message was added. ``index`` is the
        assistant message that made the call, ``kind`` says which answer was
        written (``"interrupted"`` or ``"not_run"``).
    ``"moved"``
        The call's real answer came after a user/system message; it was moved
        up beside its call. ``index`` is where it was.
    ``"dropped_orphan"``
        A tool message answered an id that the assistant message of its turn
        did not call. ``index`` is where it was; it is not in the result.
    ``"dropped_duplicate"``
        A second answer to a call that already had one; the first is kept.
    ``"removed_empty_tool_calls"``
        An assistant message had an empty ``tool_calls`` list, which the API
        refuses (a message that calls no tool has no ``tool_calls``); the
        message is kept, as a copy without the key. ``index`` is the
        message, and ``tool_call_id`` is ``None``: no call is concerned.

    ``index`` always counts in the list you passed; ``healed_index`` counts
    in [`HealResult.messages`][juno_bind_trio.transcript.HealResult] and is ``None`` for a dropped
    message.
    """

    action: HealAction
    tool_call_id: str | None
    index: int
    healed_index: int | None
    kind: Literal["interrupted", "not_run"] | None = None

    def describe(self) -> str:
        """One line for an operator log, naming the positions and the id."""
        call = repr(self.tool_call_id)
        if self.action == "synthesized":
            return (
                f"call {call} of messages[{self.index}] had no answer: "
                f"added a {self.kind!r} answer at healed[{self.healed_index}]"
            )
        if self.action == "moved":
            return (
                f"the answer to {call} at messages[{self.index}] came after another message: "
                f"moved beside its call, to healed[{self.healed_index}]"
            )
        if self.action == "removed_empty_tool_calls":
            return (
                f"messages[{self.index}] has an empty tool_calls list, which the API refuses: "
                f"removed it, the message kept at healed[{self.healed_index}]"
            )
        if self.action == "dropped_orphan":
            return (
                f"messages[{self.index}] answers {call}, which no assistant message "
                "of its turn called: dropped"
            )
        return f"messages[{self.index}] is a second answer to {call}: dropped"


@attrs.frozen(kw_only=True)
class HealResult:
    """What [`heal_transcript()`][juno_bind_trio.transcript.heal_transcript] returns: the healed
    transcript and every change made.

    ``messages`` is a new list owned by you. A message healing kept is the
    very object you passed (not a copy; a non-``dict`` mapping is copied into
    a ``dict``); a synthesized answer, and an assistant message whose empty
    ``tool_calls`` was removed, are new ``dict``s. ``changes`` is in
    the order the healed transcript reads; empty means the transcript was
    already well-formed and ``messages`` equals what you passed.
    """

    messages: list[dict[str, Any]]
    changes: tuple[HealChange, ...]

    @property
    def changed(self) -> bool:
        """Whether healing changed anything."""
        return bool(self.changes)


def _synthesized_answer(
    tool_call_id: str, kind: Literal["interrupted", "not_run"]
) -> dict[str, Any]:
    """The tool message healing writes for a call that has no answer.

    The same envelope the loop writes when a cancel or a stop cuts a batch
    short, byte for byte (key order ``success``, ``kind``, ``error``; no ASCII
    escaping), so a healed transcript and one the loop finished cleanly read
    the same to the model and to a host that parses the content. The content
    is the same for every call of a kind, so it is rendered once.
    """
    return tool_message(tool_call_id, _SYNTHESIZED_CONTENT[kind])


_SYNTHESIZED_CONTENT: Final[Mapping[str, str]] = {
    kind: tool_failure_message("_", error, kind)["content"]  # type: ignore[arg-type]
    for kind, error in _SYNTHESIZED_ERRORS.items()
}


class _Read(NamedTuple):
    """What healing needs from one message, read and checked once."""

    role: str
    call_ids: tuple[str, ...]  # an assistant message's tool call ids, in order
    answers: str | None  # a tool message's tool_call_id
    empty_calls: bool = False  # an assistant message with an empty tool_calls list


_SPOKEN: Final = {role: _Read(role, (), None) for role in _ROLES}
_EMPTY_CALLS: Final = _Read("assistant", (), None, empty_calls=True)


def heal_transcript(
    messages: Sequence[Mapping[str, Any]],
    *,
    not_started: Collection[str] = (),
) -> HealResult:
    """Repair *messages* so every tool call is answered exactly once, right after its call.

    The healed transcript keeps the provider rule: each assistant message with
    ``tool_calls`` is followed immediately by exactly one tool message per
    call id (and by nothing else until they are all there), and no tool
    message appears anywhere else. To get there, for each assistant message:

    * a real answer already in the block stays where it is;
    * a real answer that arrived later in the same turn (after a user, system
      or developer message, before the next assistant message) is moved up
      into the block — the only message healing ever moves;
    * a call with no answer in its turn gets a synthesized one:
      ``kind: "not_run"`` if its id is in *not_started*, else
      ``kind: "interrupted"`` (see below);
    * a second answer to the same call is dropped (the first one wins), and
      so is a tool message that answers no call of its own turn;
    * an empty ``tool_calls`` list, which the API refuses, is removed from
      its message (the message itself stays).

    User, assistant, system and developer messages are never added, removed
    or reordered, and never changed but for that empty list. Healing a
    healed transcript changes nothing.

    **Which kind.** ``"interrupted"`` says the call may have run and its
    effect is unknown; ``"not_run"`` says nothing happened, in the loop's
    own refusal sentence ("The run is ending — do not retry it …"). It is
    written only where you *know* the call never started — pass those ids
    in *not_started* (for example, from your tool-call receipts: calls
    without a "started" receipt). Nothing in a transcript can prove that on
    its own, so the default is the reading that is safe when wrong. A run
    that goes on does not leave a never-started call to the model: its
    resume dispatches the call itself (as
    [DurableRun.finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn]
    does), and the call's real answer takes the place of the refusal.

    Call it on a transcript loaded for a resume, or before sending one a
    crash or cancel may have cut short — not while a batch is still running,
    whose calls would be answered ``"interrupted"`` under it.

    :param messages: OpenAI chat-format message dicts, in order.
    :param not_started: tool call ids known never to have started.
    :returns: the healed messages and every change made.
    :raises TranscriptError: a message is malformed; ``index`` names it.
    :raises TypeError: *messages* is not a sequence, or *not_started* is not a
        collection of strings.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise TypeError(
            "heal_transcript: messages must be a list of chat message dicts, "
            f"got {type(messages).__name__}"
        )
    never_started = _read_not_started(not_started)
    read = _read_messages(messages)

    # next_assistant[i]: index of the first assistant message at or after i (or
    # len). A turn's late answers are looked for up to there and no further: past
    # the next assistant message the model has already spoken without seeing the
    # answer, so moving it back would rewrite what that reply was based on.
    count = len(read)
    next_assistant = [count] * (count + 1)
    for i in range(count - 1, -1, -1):
        next_assistant[i] = i if read[i].role == "assistant" else next_assistant[i + 1]

    healed: list[dict[str, Any]] = []
    changes: list[HealChange] = []
    moved_away: set[int] = set()

    turn_index = -1  # the assistant message whose turn we are in (-1: none yet)
    turn_calls: tuple[str, ...] = ()
    turn_call_set: frozenset[str] = frozenset()  # for membership: a turn may make thousands
    answered: set[str] = set()
    block_open = False  # still inside the contiguous run of answers after turn_index

    def close_block(at: int) -> None:
        # Called at the first message that is not an answer (or at the end). Each
        # call still unanswered takes its real answer from later in the turn if
        # there is one, else a synthesized one, in the order the calls were made.
        late: dict[str, int] = {}
        for j in range(at, next_assistant[at]):
            call_id = read[j].answers
            if call_id is not None and call_id not in late:
                late[call_id] = j
        for call_id in turn_calls:
            if call_id in answered:
                continue
            answered.add(call_id)
            j = late.get(call_id, -1)
            if j >= 0:
                moved_away.add(j)
                healed.append(_as_dict(messages[j]))
                changes.append(
                    HealChange(
                        action="moved",
                        tool_call_id=call_id,
                        index=j,
                        healed_index=len(healed) - 1,
                    )
                )
            else:
                kind: Literal["interrupted", "not_run"] = (
                    "not_run" if call_id in never_started else "interrupted"
                )
                healed.append(_synthesized_answer(call_id, kind))
                changes.append(
                    HealChange(
                        action="synthesized",
                        tool_call_id=call_id,
                        index=turn_index,
                        healed_index=len(healed) - 1,
                        kind=kind,
                    )
                )

    for i, info in enumerate(read):
        if i in moved_away:
            continue
        if info.answers is not None:
            call_id = info.answers
            if call_id not in turn_call_set:
                # Includes a late answer to an *earlier* turn's call: to the provider an
                # answer belongs to the assistant message before it, so one whose call
                # is further back is as unanswerable as one nobody made (and that call
                # was already answered when its own turn ended).
                changes.append(
                    HealChange(
                        action="dropped_orphan", tool_call_id=call_id, index=i, healed_index=None
                    )
                )
            elif call_id in answered or not block_open:
                changes.append(
                    HealChange(
                        action="dropped_duplicate", tool_call_id=call_id, index=i, healed_index=None
                    )
                )
            else:
                answered.add(call_id)
                healed.append(_as_dict(messages[i]))
            continue
        if block_open:
            close_block(i)
            block_open = False
        if info.empty_calls:
            healed.append({k: v for k, v in messages[i].items() if k != "tool_calls"})
            changes.append(
                HealChange(
                    action="removed_empty_tool_calls",
                    tool_call_id=None,
                    index=i,
                    healed_index=len(healed) - 1,
                )
            )
        else:
            healed.append(_as_dict(messages[i]))
        if info.role == "assistant":
            turn_index = i
            turn_calls = info.call_ids
            turn_call_set = frozenset(turn_calls)
            answered = set()
            block_open = bool(turn_calls)
    if block_open:
        close_block(count)
    return HealResult(messages=healed, changes=tuple(changes))


def _as_dict(message: Mapping[str, Any]) -> dict[str, Any]:
    return message if isinstance(message, dict) else dict(message)


def _read_not_started(not_started: Collection[str]) -> frozenset[str]:
    # A bare string is a Collection[str] of its characters: "call_1" would
    # silently mean {"c", "a", "l", ...} and mark nothing, so refuse it.
    if isinstance(not_started, str | bytes) or not isinstance(not_started, Collection):
        raise TypeError(
            "heal_transcript: not_started must be a collection of tool call ids, "
            f"got {type(not_started).__name__}"
        )
    for item in not_started:
        if not isinstance(item, str):
            raise TypeError(
                f"heal_transcript: not_started must hold tool call id strings, got {item!r}"
            )
    return frozenset(not_started)


def _read_messages(messages: Sequence[object]) -> list[_Read]:
    # Runs over every message of every transcript healed, so the common shapes
    # (a plain dict whose role and id are in order) are read inline; anything
    # else goes to _read_message, which checks it in full and names the fault.
    read: list[_Read] = []
    append = read.append
    for index, message in enumerate(messages):
        if type(message) is dict:
            role = message.get("role")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if type(call_id) is str and call_id:
                    append(_Read("tool", (), call_id))
                    continue
            elif (
                type(role) is str
                and role in _SPOKEN
                and (role != "assistant" or message.get("tool_calls") is None)
            ):
                append(_SPOKEN[role])
                continue
        append(_read_message(index, message))
    return read


def _read_message(index: int, message: object) -> _Read:
    # Runs once per message of every transcript healed, so the common shapes
    # (plain dicts and lists) skip the abstract-base-class checks, and the error
    # text is only built on the way to raising it.
    def where() -> str:
        return f"heal_transcript: messages[{index}]"

    if type(message) is not dict and not isinstance(message, Mapping):
        raise TranscriptError(
            f"{where()} must be a chat message dict, got {type(message).__name__}", index
        )
    role = message.get("role")
    if type(role) is not str or role not in _ROLES:  # not hashed before it is known a str
        expected = ", ".join(sorted(_ROLES))
        raise TranscriptError(
            f"{where()} has role {shown(role)}; expected one of {expected}", index
        )
    if role == "tool":
        call_id = message.get("tool_call_id")
        if type(call_id) is not str or not call_id:
            raise TranscriptError(
                f"{where()} is a tool message whose tool_call_id is not a non-empty string: "
                f"{shown(call_id)}",
                index,
            )
        return _Read(role, (), call_id)
    if role != "assistant":
        return _SPOKEN[role]
    calls = message.get("tool_calls")
    if calls is None:
        return _SPOKEN[role]
    if type(calls) is not list and (
        isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence)
    ):
        raise TranscriptError(
            f"{where()}.tool_calls must be a list of tool calls, got {type(calls).__name__}",
            index,
        )
    if not calls:
        return _EMPTY_CALLS
    if type(calls) is list and set(map(type, calls)) <= {dict}:
        # The usual shape, checked at C speed: dicts whose ids are distinct,
        # non-empty strings. One assistant message may make thousands of calls.
        ids = [call.get("id") for call in calls]
        if set(map(type, ids)) <= {str}:  # before hashing them
            distinct = set(ids)
            if len(distinct) == len(ids) and "" not in distinct:
                return _Read(role, tuple(ids), None)
    # Otherwise, call by call, to name the first one at fault.
    ordered: list[str] = []
    seen: set[str] = set()
    for k, call in enumerate(calls):
        call_id = call.get("id") if type(call) is dict or isinstance(call, Mapping) else None
        if type(call_id) is not str or not call_id:
            raise TranscriptError(
                f"{where()}.tool_calls[{k}] must be a tool call dict with a non-empty string "
                f"'id', got {shown(call)}",
                index,
            )
        if call_id in seen:
            # Two calls with one id cannot be told apart by any answer; which
            # answer belongs to which is a guess, and healing does not guess.
            raise TranscriptError(
                f"{where()}.tool_calls has two calls with id {shown(call_id)}", index
            )
        seen.add(call_id)
        ordered.append(call_id)
    return _Read(role, tuple(ordered), None)
