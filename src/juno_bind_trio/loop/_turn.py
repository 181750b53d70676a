"""The one argument ``call_model`` receives: everything a turn needs, and the stream it owns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from juno_bind_trio._errors import UsageError
from juno_bind_trio._validate import shown

from ._events import OutputProgressEvent

if TYPE_CHECKING:
    from juno_bind_trio.completion import TurnTextStream

    from ._events import LoopEvent

__all__ = ["ModelTurn"]

# Roles an extra message may have. A tool message answers a call the loop
# made, and an assistant message's tool calls are calls the loop would have
# to run: neither can be added behind the loop's back.
_EXTRA_ROLES: Final = frozenset({"system", "developer", "user", "assistant"})


def _check_extra(owner: str, index: int, message: object) -> dict[str, Any]:
    where = f"{owner}: messages[{index}]"
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a chat message dict, got {shown(message)}")
    role = message.get("role")
    if not isinstance(role, str):
        raise TypeError(f"{where} must have a string 'role', got {shown(role)}")
    if role not in _EXTRA_ROLES:
        if role == "tool":
            raise ValueError(
                f"{where} is a tool message; tool messages answer the calls the loop runs, "
                "so a turn's extra messages cannot hold one"
            )
        raise ValueError(
            f"{where} has role {shown(role)}; expected one of {', '.join(sorted(_EXTRA_ROLES))}"
        )
    if message.get("tool_calls"):
        raise ValueError(
            f"{where} is an assistant message with tool_calls; only the loop makes tool calls "
            "(return them in the ModelTurnResult instead)"
        )
    content = message.get("content")
    if content is None:
        if role != "assistant":
            raise TypeError(f"{where} is a {role} message with no content")
    elif not isinstance(content, str):
        if not isinstance(content, list) or not all(isinstance(p, Mapping) for p in content):
            raise TypeError(
                f"{where}.content must be a string or a list of content-part dicts, "
                f"got {shown(content)}"
            )
        content = [dict(part) for part in content]
    copied = dict(message)
    if content is not None:
        copied["content"] = content
    return copied


@final
@attrs.define(eq=False, kw_only=True)
class ModelTurn:
    """One model call of a run, as handed to ``call_model``.

    * *iteration*: the run's count: 1 for the first model call of a new run,
      and so on; a loop built with ``first_iteration=k`` starts at *k*.
    * *turn_id*: ``"<run_id>:<iteration>"``, unique per turn; the id the text
      stream puts on the wire.
    * *messages*: the live transcript. Read it; do not mutate it (the loop
      appends the assistant message itself, from the result).
    * *tools*: what ``build_tools`` returned for this turn.
    * *text_stream*: a [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream]
      made for this turn when the loop was given a ``text_sink``, else
      ``None``. Call its ``begin_attempt()`` at the top of every attempt and
      ``observe(delta)`` for each content delta; **do not call** ``finish()``:
      the loop does, however the turn ends, which is the rule a host building
      the stream itself could forget.

    [`report_progress()`][juno_bind_trio.loop.ModelTurn.report_progress] sends an
    [`OutputProgressEvent`][juno_bind_trio.loop.OutputProgressEvent]; it is synchronous, cheap and
    never raises into the turn.
    [`with_extra_messages()`][juno_bind_trio.loop.ModelTurn.with_extra_messages] makes the same
    turn with more messages after the transcript, for a re-ask inside the turn.
    """

    iteration: int
    turn_id: str
    messages: list[dict[str, Any]]
    tools: Sequence[Any]
    text_stream: TurnTextStream | None
    _emit: Callable[[LoopEvent], None] = attrs.field(alias="emit", repr=False)
    # One cell shared by the turn and every turn derived from it: set by the
    # loop when call_model has returned or raised.
    _ended: list[bool] = attrs.field(factory=lambda: [False], init=False, repr=False)

    def with_extra_messages(self, messages: Sequence[Mapping[str, Any]]) -> ModelTurn:
        """This turn again, with *messages* after the transcript: a re-ask inside the turn.

        A ``call_model`` port that does not accept the model's answer (it does
        not parse, it breaks a rule of yours) asks again within the same turn:

        ```python
        async def call_model(turn):
            result = await model(turn)
            if not acceptable(result.content):
                again = turn.with_extra_messages([
                    {"role": "assistant", "content": result.content},
                    {"role": "user", "content": "That was not valid JSON; answer again."},
                ])
                result = await model(again)
            return result
        ```

        The new turn has the same ``iteration``, ``turn_id``, ``tools`` and
        ``text_stream`` (so call the stream's ``begin_attempt()`` for the
        re-ask, as for any attempt: the reader then sees the new answer
        replace the old), and its ``report_progress()`` reaches the same run.
        Its ``messages`` are a new list: the transcript, then copies of
        *messages*, in order. The transcript itself is not touched: what the
        loop commits for the turn is the ``ModelTurnResult`` that
        ``call_model`` returns, so the extra messages never enter it, a cancel
        during the re-ask leaves it as the turn found it, and it still
        answers every call. Derive from a derived turn to add more.

        *messages* are chat message dicts with role ``"user"``, ``"system"``,
        ``"developer"`` or ``"assistant"`` and content (a string or a list of
        content parts; an assistant's may be ``None``). A tool message, or an
        assistant message with ``tool_calls``, raises ``ValueError``: only the
        loop makes and answers tool calls. Other bad input raises
        ``TypeError``. Calling it after ``call_model`` has returned for this
        turn raises [`UsageError`][juno_bind_trio.UsageError]: the turn is
        committed, and a re-ask belongs inside the call.
        """
        owner = "ModelTurn.with_extra_messages"
        given: object = messages
        if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
            raise TypeError(
                f"{owner}: messages must be a list of chat message dicts, got {shown(given)}"
            )
        if self._ended[0]:
            raise UsageError(
                f"{owner}: turn {self.turn_id!r} has ended (its call_model returned); "
                "re-ask inside call_model, before it returns"
            )
        extra = [_check_extra(owner, index, message) for index, message in enumerate(given)]
        derived = ModelTurn(
            iteration=self.iteration,
            turn_id=self.turn_id,
            messages=[*self.messages, *extra],
            tools=self.tools,
            text_stream=self.text_stream,
            emit=self._emit,
        )
        derived._ended = self._ended
        return derived

    def with_messages(self, messages: Sequence[Mapping[str, Any]]) -> ModelTurn:
        """This turn again, sending *messages* in place of the transcript.

        For a ``call_model`` port that shapes what the model is sent (a
        history trimmed or summarized, instructions added for this request)
        without touching what the run keeps: the loop commits only the
        ``ModelTurnResult``, never these messages. The new turn has the same
        ``iteration``, ``turn_id``, ``tools`` and ``text_stream``, and ends
        with this one. *messages* are chat message dicts, copied into a new
        list; keeping their tool calls paired with their answers is the
        caller's part (the provider refuses a broken pair). A list that is
        not of dicts with a string ``role`` raises ``TypeError``; calling it
        after ``call_model`` returned raises [`UsageError`][juno_bind_trio.UsageError].
        """
        owner = "ModelTurn.with_messages"
        given: object = messages
        if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
            raise TypeError(
                f"{owner}: messages must be a list of chat message dicts, got {shown(given)}"
            )
        for index, message in enumerate(given):
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
                raise TypeError(
                    f"{owner}: messages[{index}] must be a chat message dict with a string "
                    f"'role', got {shown(message)}"
                )
        if self._ended[0]:
            raise UsageError(
                f"{owner}: turn {self.turn_id!r} has ended (its call_model returned); "
                "shape what is sent inside call_model, before it returns"
            )
        derived = ModelTurn(
            iteration=self.iteration,
            turn_id=self.turn_id,
            messages=[dict(message) for message in given],
            tools=self.tools,
            text_stream=self.text_stream,
            emit=self._emit,
        )
        derived._ended = self._ended
        return derived

    def with_tools(self, tools: Sequence[Any]) -> ModelTurn:
        """This turn again, offering *tools* in place of what ``build_tools`` returned.

        For a ``call_model`` port that chooses the tools of each step (some
        hidden, some described differently) after awaiting something of its
        own: ``build_tools`` is synchronous. The new turn has the same
        ``iteration``, ``turn_id``, ``messages`` (the same list) and
        ``text_stream``, and ends with this one. *tools* is copied into a
        tuple; a ``str``, ``bytes`` or mapping instead of a sequence raises
        ``TypeError``; calling it after ``call_model`` returned raises
        [`UsageError`][juno_bind_trio.UsageError]. Answering a call of a tool
        the turn did not offer is the ``run_tool_call`` port's part.
        """
        owner = "ModelTurn.with_tools"
        given: object = tools
        if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
            raise TypeError(
                f"{owner}: tools must be a sequence of tool definitions, got {shown(given)}"
            )
        if self._ended[0]:
            raise UsageError(
                f"{owner}: turn {self.turn_id!r} has ended (its call_model returned); "
                "choose the tools inside call_model, before it returns"
            )
        derived = ModelTurn(
            iteration=self.iteration,
            turn_id=self.turn_id,
            messages=self.messages,
            tools=tuple(given),
            text_stream=self.text_stream,
            emit=self._emit,
        )
        derived._ended = self._ended
        return derived

    def _end(self) -> None:
        self._ended[0] = True

    def report_progress(self, output_tokens: int, tool_calls: int = 0) -> None:
        """Report *output_tokens* generated so far and *tool_calls* seen, for a live indicator."""
        given: object = output_tokens
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            raise TypeError(
                "ModelTurn.report_progress: output_tokens must be a non-negative integer, "
                f"got {output_tokens!r}"
            )
        count: object = tool_calls
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(
                "ModelTurn.report_progress: tool_calls must be a non-negative integer, "
                f"got {tool_calls!r}"
            )
        self._emit(OutputProgressEvent(self.iteration, output_tokens, tool_calls))
