"""The chat-completions transcript as a Messages API request, and nothing lost on the way back.

The transcript every layer reads is the chat-completions shape; the Messages
API wants another: ``system`` beside the messages, never in them; a tool's
answer is a ``tool_result`` block *in a user turn*, the very next one, every
call of the assistant turn answered there; an assistant turn is a list of
blocks (thinking, text, ``tool_use`` with its input as an object). The
conversion happens here, per request, and never touches the transcript.

Thinking blocks travel in the assistant message's ``provider_state``
(``{"provider": "anthropic", "thinking": [...]}``), as the API sent them:
the API refuses a tool loop's next request without them, and refuses them
changed (each carries a signature over its text). They are sent back at the
head of their turn, as they came; text and tool calls are rebuilt from the
message itself, so a transcript healed or edited stays the one truth for
what was said and asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from juno_bind_trio._calls import parse_arguments
from juno_bind_trio._errors import ToolCallArgumentsError
from juno_bind_trio._options import OPENAI_CHAT_ONLY_OPTIONS
from juno_bind_trio.providers._adapter import provider_state_of
from juno_bind_trio.schema import sanitize_tool_schema

__all__ = [
    "NAME",
    "OPENAI_ONLY_OPTIONS",
    "STRUCTURED_OUTPUT_TOOL",
    "convert_messages",
    "convert_tools",
    "request_arguments",
]

NAME: Final = "anthropic"

STRUCTURED_OUTPUT_TOOL: Final = "final_result"
"""The tool a ``response_format`` JSON schema becomes (the Messages API has no native mode)."""

OPENAI_ONLY_OPTIONS: Final = OPENAI_CHAT_ONLY_OPTIONS | {
    "frequency_penalty",
    "presence_penalty",
    "seed",
}
"""Options of the chat-completions wire the Messages API has no word for: not sent.

A plan that falls back from OpenAI to Anthropic shares its request options;
these are dropped here rather than refused there.
"""

# Arguments of `messages.create` passed through as they are.
_PASSED: Final = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "stop_sequences",
        "thinking",
        "service_tier",
        "extra_headers",
        "extra_query",
        "extra_body",
        "timeout",
    }
)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _image(part: Mapping[str, Any]) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    url = url if isinstance(url, str) else ""
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _user_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text" and part.get("text"):
                blocks.append({"type": "text", "text": part["text"]})
            elif kind == "image_url":
                blocks.append(_image(part))
    return blocks


def _tool_input(function: Mapping[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments")
    try:
        return parse_arguments("anthropic", raw if isinstance(raw, str) or raw is None else None)
    except ToolCallArgumentsError:
        # A call the model made with broken arguments was answered with the
        # error; the API still needs an object here to pair with that answer.
        return {}


def _assistant_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    state = provider_state_of(message, NAME)
    if state is not None:
        thinking = state.get("thinking")
        if isinstance(thinking, list):
            blocks.extend(thinking)  # as the API sent them: unchanged
    text = _text_of(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if not isinstance(function, Mapping):
            continue
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": _tool_input(function),
            }
        )
    return blocks


def convert_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system blocks, messages)`` for ``messages.create``, from a chat-completions transcript."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"))
            if text:
                system.append({"type": "text", "text": text})
            continue
        if role == "assistant":
            blocks = _assistant_blocks(message)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            content = message.get("content")
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": content if isinstance(content, str) else _text_of(content),
            }
            blocks = [result]
        else:
            blocks = _user_blocks(message.get("content"))
            if not blocks:
                continue
        # Tool results and the user's words after them are one user turn: the
        # API wants every answer in the turn right after the calls.
        if out and out[-1]["role"] == "user":
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": "user", "content": blocks})
    return system, out


def convert_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as Messages API tools, schemas in the anthropic dialect."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(function, Mapping):
            out.append(dict(tool))  # a tool already in the Messages API's shape
            continue
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        converted: dict[str, Any] = {
            "name": function.get("name"),
            "input_schema": sanitize_tool_schema(parameters, dialect="anthropic").schema,
        }
        if function.get("description"):
            converted["description"] = function["description"]
        out.append(converted)
    return out


def _tool_choice(value: object) -> object:
    if value == "auto":
        return {"type": "auto"}
    if value == "required":
        return {"type": "any"}
    if value == "none":
        return {"type": "none"}
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        return {"type": "tool", "name": name}
    return value


def request_arguments(
    options: Mapping[str, Any], tools: list[dict[str, Any]], max_tokens: int
) -> tuple[dict[str, Any], str | None]:
    """The ``messages.create`` arguments *options* mean, and the structured-output tool's name.

    *tools* (already converted) gets the structured-output tool appended when
    ``response_format`` asks for a JSON schema.
    """
    arguments: dict[str, Any] = {}
    extra_body: dict[str, Any] = {}
    structured: str | None = None
    tool_choice: Any = None
    parallel: object = None
    for key, value in options.items():
        if key in _PASSED:
            arguments[key] = value
        elif key in ("max_tokens", "max_completion_tokens"):
            max_tokens = value
        elif key == "stop":
            arguments["stop_sequences"] = [value] if isinstance(value, str) else list(value)
        elif key == "tool_choice":
            tool_choice = _tool_choice(value)
        elif key == "parallel_tool_calls":
            parallel = value
        elif key == "response_format":
            structured = _structured_tool(value, tools)
        elif key not in OPENAI_ONLY_OPTIONS:
            extra_body[key] = value
    arguments["max_tokens"] = max_tokens
    thinking = arguments.get("thinking")
    thinking_on = isinstance(thinking, Mapping) and thinking.get("type") == "enabled"
    if structured is not None and tool_choice is None:
        # Forcing the tool is what makes the answer the schema's; the API
        # refuses a forced tool with thinking on, where it is only offered.
        tool_choice = {"type": "auto"} if thinking_on else {"type": "tool", "name": structured}
    if parallel is False and tools:
        tool_choice = dict(tool_choice or {"type": "auto"})
        tool_choice["disable_parallel_tool_use"] = True
    if tool_choice is not None and tools:
        arguments["tool_choice"] = tool_choice
    if extra_body:
        arguments["extra_body"] = {**extra_body, **dict(arguments.get("extra_body") or {})}
    return arguments, structured


def _structured_tool(value: object, tools: list[dict[str, Any]]) -> str | None:
    if not isinstance(value, Mapping) or value.get("type") != "json_schema":
        return None  # "text", or "json_object": no schema to give a tool
    spec = value.get("json_schema")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        return None
    schema = sanitize_tool_schema(spec["schema"], dialect="anthropic").schema
    tools.append(
        {
            "name": STRUCTURED_OUTPUT_TOOL,
            "description": (
                "Give your final answer by calling this tool, its input being the answer "
                f"({spec.get('name') or 'the requested structure'})."
            ),
            "input_schema": schema,
        }
    )
    return STRUCTURED_OUTPUT_TOOL


def structured_content(arguments: str) -> str:
    """The structured-output tool's input as the turn's content: the JSON text of the answer."""
    try:
        return json.dumps(json.loads(arguments or "{}"), separators=(",", ":"))
    except ValueError:
        return arguments
