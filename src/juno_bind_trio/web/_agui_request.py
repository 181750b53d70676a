"""Reading AG-UI's ``RunAgentInput`` into a prompt and a transcript.

The input is validated by the ``ag-ui-protocol`` package's own model. Its
``messages`` become the run's ``message_history`` in the chat-completions
shape (a ``developer`` message is a system message; an assistant message's
``toolCalls`` its ``tool_calls``; a tool message answers its call; a
``reasoning`` or ``activity`` message, display only, is skipped), except the
last, which is the user's new message (its text is the prompt), or the
answer to a call of a client-defined tool: the run then goes on from the
answers, with no prompt.

Client-defined tools
--------------------

``RunAgentInput.tools`` are tools the *client* runs (a date picker, a
confirmation dialog, the page's own state). [client_tools][juno_bind_trio.web.client_tools]
makes each an [ExternalTool][juno_bind_trio.agent.ExternalTool] of the run:
when the model calls one, the run suspends with the call waiting (a
[PendingToolCall][juno_bind_trio.agent.PendingToolCall] of kind
``"external"``), and the stream ends the run with the call's
``TOOL_CALL_START`` / ``ARGS`` / ``END`` and no result, so the client runs it.
Its next ``RunAgentInput`` carries the call's answer as a tool message, and
the run goes on from there.
``state``, ``context`` and ``forwardedProps`` are the host's to read from the
input. A request whose input does not validate, or whose last message is not
a user's text, is refused with an [AGUIInputError][juno_bind_trio.web.AGUIInputError]
naming what is wrong, which the endpoint answers 400.
"""

from __future__ import annotations

from typing import Any, Final

import pydantic
from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    ReasoningMessage,
    RunAgentInput,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

from juno_bind_trio.agent import ExternalTool, Tool

_NO_PARAMETERS: Final[dict[str, Any]] = {"type": "object", "properties": {}}

__all__ = ["AGUIInputError", "chat_from_run_input", "client_tools", "read_run_input"]


class AGUIInputError(ValueError):
    """A ``RunAgentInput`` this package cannot run: the message says what."""


def read_run_input(body: object) -> RunAgentInput:
    """Validate a request body as a ``RunAgentInput``; raise
    [AGUIInputError][juno_bind_trio.web.AGUIInputError] naming the first problem."""
    try:
        return RunAgentInput.model_validate(body)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise AGUIInputError(f"RunAgentInput.{where}: {first.get('msg')}") from None


def _text(where: str, content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for j, part in enumerate(content):
            kind = getattr(part, "type", None)
            text = getattr(part, "text", None)
            if kind != "text" or not isinstance(text, str):
                raise AGUIInputError(f"{where}.content[{j}]: a {kind!r} part cannot be read here")
            pieces.append(text)
        return "".join(pieces)
    raise AGUIInputError(f"{where}.content must be text")


def client_tools(run_input: RunAgentInput) -> list[Tool]:
    """The input's client-defined tools, each an
    [ExternalTool][juno_bind_trio.agent.ExternalTool] of the run; see the module.

    A tool whose parameters are not a JSON schema the run can send raises
    [AGUIInputError][juno_bind_trio.web.AGUIInputError] naming ``tools[i]``."""
    given: object = run_input
    if not isinstance(given, RunAgentInput):
        raise TypeError(
            f"client_tools: run_input must be a RunAgentInput (see read_run_input), "
            f"got {run_input!r:.80}"
        )
    tools: list[Tool] = []
    for i, declared in enumerate(run_input.tools or ()):
        parameters = declared.parameters or _NO_PARAMETERS
        try:
            tools.append(
                ExternalTool(declared.name, parameters, description=declared.description or None)
            )
        except (TypeError, ValueError) as exc:
            raise AGUIInputError(f"RunAgentInput.tools[{i}] ({declared.name!r}): {exc}") from None
    return tools


def chat_from_run_input(run_input: RunAgentInput) -> tuple[str | None, list[dict[str, Any]]]:
    """``(prompt, message_history)`` from a validated ``RunAgentInput``; see the module.

    The prompt is ``None`` when the input ends with answers to tool calls (a
    client-defined tool's): the run goes on from them."""
    given: object = run_input
    if not isinstance(given, RunAgentInput):
        raise TypeError(
            f"chat_from_run_input: run_input must be a RunAgentInput (see read_run_input), "
            f"got {run_input!r:.80}"
        )
    messages = run_input.messages
    if not messages:
        raise AGUIInputError("RunAgentInput.messages must end with the user's new message")
    last = messages[-1]
    answers = isinstance(last, ToolMessage)
    history: list[dict[str, Any]] = []
    for i, message in enumerate(messages if answers else messages[:-1]):
        where = f"messages[{i}]"
        if isinstance(message, UserMessage):
            history.append({"role": "user", "content": _text(where, message.content)})
        elif isinstance(message, SystemMessage | DeveloperMessage):
            history.append({"role": "system", "content": message.content})
        elif isinstance(message, AssistantMessage):
            wire: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                wire["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                    for call in message.tool_calls
                ]
            history.append(wire)
        elif isinstance(message, ReasoningMessage | ActivityMessage):
            continue  # what the client showed (thinking, activity): not the model's to read
        elif isinstance(message, ToolMessage):
            history.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": _text(where, message.content),
                }
            )
        else:
            raise AGUIInputError(f"{where}: a {message.role!r} message cannot be read here")
    where = f"messages[{len(messages) - 1}]"
    if answers:
        return None, history
    if not isinstance(last, UserMessage):
        raise AGUIInputError(
            f"{where}: the last message must be the user's (or a tool call's answer), "
            f"got {last.role!r}"
        )
    prompt = _text(where, last.content)
    if not prompt.strip():
        raise AGUIInputError(f"{where}: the user's message has no text")
    return prompt, history
