"""Reading ``useChat``'s request: UI messages with parts, into a prompt and a transcript.

``useChat`` (through the ``ai`` package's ``DefaultChatTransport``) posts
``{"id", "messages", "trigger", "messageId", ...}``; each message is
``{"id", "role", "parts": [...]}``. The last message must be the user's new
one (its text parts are the prompt); for ``trigger: "regenerate-message"`` a
last assistant message is dropped first (it is the answer being replaced).
Everything before becomes the run's ``message_history``, in the
chat-completions shape the package keeps:

* a ``system`` or ``user`` message: its ``text`` parts, joined;
* an ``assistant`` message: one assistant message per step (``step-start``
  parts divide them), carrying the step's text and its tool calls (parts
  ``tool-<name>`` and ``dynamic-tool``), each call followed by its answer: the
  ``output`` of a part in ``output-available`` (JSON-encoded unless a
  string), the ``errorText`` of one in ``output-error``. A call with no
  answer yet is answered as not run by the agent's transcript healing.

``reasoning``, ``source-*``, ``file``, ``data-*`` parts of an assistant
message are display only and skipped. Anything else is refused with a
[UIMessageError][juno_bind_trio.web.UIMessageError] naming the part
(``messages[3].parts[1]``), which the endpoint answers 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["UIMessageError", "chat_from_ui_messages"]

_SKIPPED_ASSISTANT_PARTS: Final = frozenset(
    {"reasoning", "source-url", "source-document", "file", "reasoning-file"}
)
_MAX_MESSAGES: Final = 10_000


class UIMessageError(ValueError):
    """A request's UI messages cannot be read: the message names the part."""


def _text_of(where: str, parts: Sequence[object], *, allow_step: bool = True) -> str:
    pieces: list[str] = []
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if not isinstance(part, Mapping):
            raise UIMessageError(f"{at} must be an object, got {part!r:.80}")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise UIMessageError(f"{at}.text must be a string")
            pieces.append(text)
        elif (kind == "step-start" and allow_step) or (
            isinstance(kind, str) and kind.startswith("data-")
        ):
            continue
        else:
            raise UIMessageError(f"{at}: a part of type {kind!r:.60} cannot be read here")
    return "".join(pieces)


def _answer(part: Mapping[str, Any], at: str) -> str | None:
    state = part.get("state")
    if state == "output-available":
        output = part.get("output")
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if state == "output-error":
        error = part.get("errorText")
        if not isinstance(error, str):
            raise UIMessageError(f"{at}.errorText must be a string")
        return json.dumps(
            {"success": False, "error": error}, ensure_ascii=False, separators=(",", ":")
        )
    if state in (
        "input-streaming",
        "input-available",
        "approval-requested",
        "approval-responded",
        "output-denied",
    ):
        return None
    raise UIMessageError(f"{at}.state {state!r:.40} is not a tool part state")


def _assistant(where: str, parts: Sequence[object]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []

    def close_step() -> None:
        if not text and not calls:
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
        if calls:
            message["tool_calls"] = list(calls)
        out.append(message)
        out.extend(answers)
        text.clear()
        calls.clear()
        answers.clear()

    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if not isinstance(part, Mapping):
            raise UIMessageError(f"{at} must be an object, got {part!r:.80}")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise UIMessageError(f"{at}.type must be a string")
        if kind == "step-start":
            close_step()
        elif kind == "text":
            value = part.get("text")
            if not isinstance(value, str):
                raise UIMessageError(f"{at}.text must be a string")
            text.append(value)
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            name = kind[5:] if kind != "dynamic-tool" else part.get("toolName")
            call_id = part.get("toolCallId")
            if not isinstance(name, str) or not name:
                raise UIMessageError(f"{at}: a tool part needs a tool name")
            if not isinstance(call_id, str) or not call_id:
                raise UIMessageError(f"{at}.toolCallId must be a non-empty string")
            value = part.get("input")
            raw = part.get("rawInput")
            arguments = (
                raw
                if value is None and isinstance(raw, str)
                else json.dumps(value if value is not None else {}, ensure_ascii=False)
            )
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
            answer = _answer(part, at)
            if answer is not None:
                answers.append({"role": "tool", "tool_call_id": call_id, "content": answer})
        elif kind in _SKIPPED_ASSISTANT_PARTS or kind.startswith("data-"):
            continue
        else:
            raise UIMessageError(f"{at}: a part of type {kind!r:.60} cannot be read here")
    close_step()
    return out


def chat_from_ui_messages(
    messages: object, *, trigger: object = "submit-message"
) -> tuple[str, list[dict[str, Any]]]:
    """``(prompt, message_history)`` from ``useChat``'s ``messages``; see the module.

    Raises [UIMessageError][juno_bind_trio.web.UIMessageError] (a
    ``ValueError``) naming what it cannot read.
    """
    if not isinstance(messages, list) or not messages:
        raise UIMessageError("'messages' must be a non-empty list of UI messages")
    if len(messages) > _MAX_MESSAGES:
        raise UIMessageError(f"'messages' holds more than {_MAX_MESSAGES} messages")
    given = list(messages)
    if (
        trigger == "regenerate-message"
        and isinstance(given[-1], Mapping)
        and given[-1].get("role") == "assistant"
    ):
        given.pop()
    elif trigger not in ("submit-message", "regenerate-message", None):
        raise UIMessageError(f"'trigger' {trigger!r:.40} is not one useChat sends")
    history: list[dict[str, Any]] = []
    prompt: str | None = None
    for i, message in enumerate(given):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise UIMessageError(f"{where} must be an object, got {message!r:.80}")
        role = message.get("role")
        parts = message.get("parts")
        if not isinstance(parts, list):
            raise UIMessageError(f"{where}.parts must be a list")
        last = i == len(given) - 1
        if role == "user":
            text = _text_of(where, parts)
            if last:
                prompt = text
            else:
                history.append({"role": "user", "content": text})
        elif role == "system":
            history.append({"role": "system", "content": _text_of(where, parts)})
        elif role == "assistant":
            if last:
                raise UIMessageError(f"{where}: the last message must be the user's")
            history.extend(_assistant(where, parts))
        else:
            raise UIMessageError(f"{where}.role {role!r:.40} is not system, user or assistant")
    if prompt is None or not prompt.strip():
        raise UIMessageError(f"messages[{len(given) - 1}]: the user's message has no text")
    return prompt, history
