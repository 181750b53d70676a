"""A run as AG-UI events: what ``@ag-ui/client``'s ``HttpAgent`` (and CopilotKit) reads.

Events are the ``ag-ui-protocol`` package's own models, encoded by its
``EventEncoder`` (Server-Sent Events, ``data: {json}``):

| run | events |
| --- | --- |
| the run starts / ends | ``RUN_STARTED`` / ``RUN_FINISHED``; ``RUN_ERROR`` if it failed |
| a model turn | ``STEP_STARTED`` / ``STEP_FINISHED`` (step name: the turn's id) |
| an attempt's text | ``TEXT_MESSAGE_START`` / ``CONTENT`` / ``END`` |
| its reasoning (thinking) | ``REASONING_START``, ``REASONING_MESSAGE_*``, ``REASONING_END`` |
| a tool call | ``TOOL_CALL_START`` (under the attempt's message) / ``ARGS`` / ``END`` |
| a call answered | ``TOOL_CALL_RESULT`` (not run or interrupted: its content says so) |
| a **reset** | ``MESSAGES_SNAPSHOT`` without the withdrawn attempt's message |
| a handoff | ``CUSTOM`` named ``handoff``, its value the run's ``handoff`` frame |

The reset
---------

AG-UI has no retraction: a client appends what it is sent. What it does have
is ``MESSAGES_SNAPSHOT``, which replaces the client's whole message list. So
when a fallback withdraws an attempt, the open text message and tool calls
are ended, and a snapshot is sent of the messages as they stand without the
withdrawn attempt's assistant message (its text and the calls streamed
under it); the replacement then streams as a new message with a new id. A
client that applies the events (``HttpAgent`` does) ends with the
conversation's messages as the run has them: the final text, never the
dead attempt's text followed by the fallback's.

The attempt's reasoning is withdrawn too. ``HttpAgent`` leaves a client's
reasoning messages alone when a snapshot holds none, so a withdrawn reasoning
message stays in the snapshot with its content emptied: the client keeps
an empty reasoning message under the withdrawn id, never the dead attempt's
thinking.

The encoder keeps the messages the client holds (the request's, in AG-UI's
shape, then what it sent) to build that snapshot.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ag_ui.encoder import EventEncoder

from juno_bind_trio._validate import error_kind
from juno_bind_trio.agent import (
    HandoffEvent,
    ReasoningEvent,
    ResetEvent,
    RunEndedEvent,
    TextEvent,
    ToolCallDeltaEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
)

from ._live_run import RunHandle
from ._runs import last_turn_calls

__all__ = ["AGUIEncoder", "agui_events"]

_ERROR_REASONS: Final = frozenset({"failed", "cancelled"})


def _new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(10)}"


class _Call:
    __slots__ = ("args", "ended", "id", "name", "started")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.args: list[str] = []
        self.started = False
        self.ended = False


class AGUIEncoder:
    """Turns a run's events into AG-UI events, one at a time; see the module.

    *messages*: the messages the client sent (``RunAgentInput.messages``),
    the base of every ``MESSAGES_SNAPSHOT``.
    [agui_events][juno_bind_trio.web.agui_events] drives it.
    """

    def __init__(self, *, thread_id: str, run_id: str, messages: Sequence[Message] = ()) -> None:
        for label, value in (("thread_id", thread_id), ("run_id", run_id)):
            given: object = value
            if not isinstance(given, str) or not given:
                raise error_kind(given, str)(
                    f"AGUIEncoder: {label} must be a non-empty str, got {value!r}"
                )
        self._thread_id = thread_id
        self._run_id = run_id
        self._messages: list[Message] = list(messages)
        self._turn: str | None = None
        self._step = False
        self._message_id: str | None = None  # the open text message
        # The message text and tool calls attach to now, and every message of
        # this attempt (what a reset withdraws), as the client keeps them.
        self._current: AssistantMessage | None = None
        self._attempt_messages: list[AssistantMessage] = []
        self._reasoning: ReasoningMessage | None = None  # the open reasoning message
        self._attempt_reasoning: list[ReasoningMessage] = []
        self._streamed = False
        self._calls: dict[int, _Call] = {}
        self._by_id: dict[str, _Call] = {}
        self._settle = False
        self._ended = False

    @property
    def ended(self) -> bool:
        """Whether ``RUN_FINISHED`` or ``RUN_ERROR`` was sent."""
        return self._ended

    @property
    def messages(self) -> list[Message]:
        """The messages the client holds now, as this encoder has sent them."""
        return list(self._messages)

    def start(self) -> list[BaseEvent]:
        """The stream's first event."""
        return [RunStartedEvent(thread_id=self._thread_id, run_id=self._run_id)]

    def feed(self, event: object, messages: Sequence[Mapping[str, Any]] = ()) -> list[BaseEvent]:
        """The AG-UI events for one event of the run (*messages*: its transcript now)."""
        out: list[BaseEvent] = []
        if isinstance(event, TextEvent):
            self._open_step(event.turn_id, out)
            text = event.text
            if text:
                self._end_reasoning(out)
                message = self._open_text(out)
                out.append(TextMessageContentEvent(message_id=message.id, delta=text))
                message.content = (message.content or "") + text
                self._streamed = True
        elif isinstance(event, ReasoningEvent):
            self._open_step(event.turn_id, out)
            if event.text:
                self._reason(event.text, out)
        elif isinstance(event, ResetEvent):
            if self._step and self._turn == event.turn_id:
                self._withdraw(out)
        elif isinstance(event, ToolCallDeltaEvent):
            self._tool_delta(event, out)
        elif isinstance(event, TurnEndedEvent):
            self._open_step(event.turn_id, out)
            content = event.content
            self._end_reasoning(out)
            if content and not self._streamed:
                # A model that did not stream its text: the answer in one message.
                message = self._open_text(out)
                out.append(TextMessageContentEvent(message_id=message.id, delta=content))
                message.content = content
            self._end_text(out)
            if event.tool_calls:
                self._settle = True
            else:
                self._close_step(out)
        elif isinstance(event, ToolCallStartedEvent | ToolCallEndedEvent):
            self._settle_calls(messages, out)
            call_id = event.tool_call_id
            call = self._by_id.get(call_id)
            if call is None:
                arguments = event.arguments if isinstance(event, ToolCallStartedEvent) else ""
                call = self._adopt(call_id, event.tool_name, arguments, out)
            self._end_call(call, out)
            if isinstance(event, ToolCallEndedEvent):
                result_id = _new_id("tool")
                out.append(
                    ToolCallResultEvent(
                        message_id=result_id,
                        tool_call_id=call_id,
                        content=event.content,
                        role="tool",
                    )
                )
                self._messages.append(
                    ToolMessage(
                        id=result_id,
                        role="tool",
                        content=event.content,
                        tool_call_id=call_id,
                    )
                )
        elif isinstance(event, HandoffEvent):
            # The run changed hands: AG-UI has no agent field on a step, so a custom
            # event says so, between the handoff's answer and the target's first step.
            out.append(CustomEvent(name="handoff", value=event.to_wire()))
        elif isinstance(event, RunEndedEvent):
            self._settle_calls(messages, out)
            self._end_reasoning(out)
            self._end_text(out)
            for call in self._by_id.values():
                self._end_call(call, out)
            self._close_step(out)
            reason = event.reason
            if reason in _ERROR_REASONS:
                out.append(RunErrorEvent(message=f"the run ended: {reason}", code=reason))
            else:
                out.append(RunFinishedEvent(thread_id=self._thread_id, run_id=self._run_id))
            self._ended = True
        return out

    # -- internals ----------------------------------------------------------------------

    def _open_step(self, turn_id: str, out: list[BaseEvent]) -> None:
        if self._turn != turn_id:
            self._settle = False
            self._end_text(out)
            self._close_step(out)
            self._turn = turn_id
            self._calls = {}
            self._current = None
            self._attempt_messages = []
            self._attempt_reasoning = []
            self._streamed = False
        if not self._step:
            self._step = True
            out.append(StepStartedEvent(step_name=turn_id))

    def _close_step(self, out: list[BaseEvent]) -> None:
        if self._step and self._turn is not None:
            self._step = False
            out.append(StepFinishedEvent(step_name=self._turn))

    def _new_message(self) -> AssistantMessage:
        message = AssistantMessage(id=_new_id("msg"), role="assistant", content=None)
        self._messages.append(message)
        self._attempt_messages.append(message)
        self._current = message
        return message

    def _open_text(self, out: list[BaseEvent]) -> AssistantMessage:
        """The open text message; a new one (the client appends each new id) if none is open."""
        current = self._current
        if self._message_id is None or current is None:
            current = self._new_message()
            self._message_id = current.id
            out.append(TextMessageStartEvent(message_id=current.id, role="assistant"))
        return current

    def _end_text(self, out: list[BaseEvent]) -> None:
        self._end_reasoning(out)
        if self._message_id is not None:
            out.append(TextMessageEndEvent(message_id=self._message_id))
            self._message_id = None

    def _reason(self, text: str, out: list[BaseEvent]) -> None:
        reasoning = self._reasoning
        if reasoning is None:
            self._end_text(out)
            reasoning = ReasoningMessage(id=_new_id("reasoning"), role="reasoning", content="")
            self._reasoning = reasoning
            self._messages.append(reasoning)
            self._attempt_reasoning.append(reasoning)
            out.append(ReasoningStartEvent(message_id=reasoning.id))
            out.append(ReasoningMessageStartEvent(message_id=reasoning.id, role="reasoning"))
        out.append(ReasoningMessageContentEvent(message_id=reasoning.id, delta=text))
        reasoning.content += text

    def _end_reasoning(self, out: list[BaseEvent]) -> None:
        reasoning = self._reasoning
        if reasoning is not None:
            self._reasoning = None
            out.append(ReasoningMessageEndEvent(message_id=reasoning.id))
            out.append(ReasoningEndEvent(message_id=reasoning.id))

    def _withdraw(self, out: list[BaseEvent]) -> None:
        self._end_reasoning(out)
        self._end_text(out)
        for call in self._calls.values():
            self._end_call(call, out)
            if call.id is not None:
                self._by_id.pop(call.id, None)
        self._calls = {}
        withdrawn = self._attempt_messages
        self._attempt_messages = []
        thought = self._attempt_reasoning
        self._attempt_reasoning = []
        self._current = None
        self._streamed = False
        for reasoning in thought:
            reasoning.content = ""  # kept, emptied: see the module
        if withdrawn or thought:
            self._messages = [m for m in self._messages if all(m is not w for w in withdrawn)]
            out.append(MessagesSnapshotEvent(messages=list(self._messages)))

    def _start_call(self, call: _Call, out: list[BaseEvent]) -> None:
        assert call.id is not None
        assert call.name is not None
        call.started = True
        self._by_id[call.id] = call
        self._end_reasoning(out)
        self._end_text(out)
        message = self._current or self._new_message()
        out.append(
            ToolCallStartEvent(
                tool_call_id=call.id, tool_call_name=call.name, parent_message_id=message.id
            )
        )
        calls = message.tool_calls or []
        calls.append(
            ToolCall(
                id=call.id, type="function", function=FunctionCall(name=call.name, arguments="")
            )
        )
        message.tool_calls = calls

    def _args(self, call: _Call, delta: str, out: list[BaseEvent]) -> None:
        out.append(ToolCallArgsEvent(tool_call_id=call.id or "", delta=delta))
        for message in self._attempt_messages:
            for kept in message.tool_calls or ():
                if kept.id == call.id:
                    kept.function.arguments += delta

    def _tool_delta(self, event: ToolCallDeltaEvent, out: list[BaseEvent]) -> None:
        self._open_step(event.turn_id, out)
        call = self._calls.get(event.index)
        if call is None:
            call = self._calls[event.index] = _Call()
        if call.id is None and event.tool_call_id:
            call.id = event.tool_call_id
        if call.name is None and event.name:
            call.name = event.name
        if event.delta:
            call.args.append(event.delta)
        if call.id is None or call.name is None:
            return
        if not call.started:
            self._start_call(call, out)
        if call.args:
            self._args(call, "".join(call.args), out)
            call.args = []

    def _adopt(self, call_id: str, name: str, arguments: str, out: list[BaseEvent]) -> _Call:
        call = _Call()
        call.id, call.name = call_id, name
        if not self._step and self._turn is not None:
            self._step = True
            out.append(StepStartedEvent(step_name=self._turn))
        self._start_call(call, out)
        if arguments:
            self._args(call, arguments, out)
        return call

    def _end_call(self, call: _Call, out: list[BaseEvent]) -> None:
        if call.started and not call.ended:
            call.ended = True
            out.append(ToolCallEndEvent(tool_call_id=call.id or ""))

    def _settle_calls(self, messages: Sequence[Mapping[str, Any]], out: list[BaseEvent]) -> None:
        if not self._settle:
            return
        self._settle = False
        for call_id, name, arguments in last_turn_calls(messages):
            if call_id not in self._by_id:
                self._adopt(call_id, name, arguments, out)


async def agui_events(
    run: RunHandle,
    *,
    thread_id: str,
    run_id: str | None = None,
    messages: Sequence[Message] = (),
) -> AsyncIterator[str]:
    """The AG-UI event stream of *run*: Server-Sent Events frames, as ``str``.

    *run* is an [AgentRun][juno_bind_trio.agent.AgentRun], read until its last
    event; *thread_id* / *run_id* as the client sent them in its
    ``RunAgentInput`` (*run_id* defaults to the run's own), *messages* the
    input's messages (the base of the snapshot a reset sends). Serve the
    frames as ``text/event-stream`` in any framework.
    """
    own = getattr(run, "run_id", None)
    encoder = AGUIEncoder(
        thread_id=thread_id,
        run_id=run_id if run_id is not None else own if isinstance(own, str) else _new_id("run"),
        messages=messages,
    )
    encode = EventEncoder().encode
    yield "".join(map(encode, encoder.start()))
    async for event in run:
        cls = event.__class__
        transcript = (
            run.messages
            if cls is ToolCallStartedEvent or cls is ToolCallEndedEvent or cls is RunEndedEvent
            else ()
        )
        out = encoder.feed(event, transcript)
        if out:
            yield "".join(map(encode, out))
    if not encoder.ended:
        yield "".join(map(encode, encoder.feed(RunEndedEvent("", "cancelled"), run.messages)))
