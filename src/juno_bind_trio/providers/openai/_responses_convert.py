"""The chat-completions transcript as a Responses API request, and back.

The transcript every layer reads is the chat-completions shape; the
Responses API takes a list of *input items* instead: a message per system,
user or assistant turn, a ``function_call`` item per tool call (its
``call_id`` the chat call's ``id``), a ``function_call_output`` item per tool
message, and the ``reasoning`` items the model produced, which a tool loop's
next request must carry back (with ``store: false``, as this adapter sends,
the API has kept nothing and refuses a call item whose reasoning is missing).
The conversion happens here, per request, and never touches the transcript.

Reasoning items travel in the assistant message's ``provider_state``
(``{"provider": "openai-responses", "reasoning": [...], "calls": {call_id:
item_id}}``), each as the API sent it (its ``encrypted_content`` included):
sent back unchanged before the turn's text and calls, which are rebuilt from
the message itself, so a healed or edited transcript stays the one truth for
what was said and asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from juno_bind_trio.providers._adapter import provider_state_of
from juno_bind_trio.schema import sanitize_tool_schema

__all__ = [
    "CHAT_ONLY_OPTIONS",
    "ENCRYPTED_REASONING",
    "FOREIGN_OPTIONS",
    "RESPONSES_NAME",
    "convert_input",
    "convert_tools",
    "request_arguments",
]

RESPONSES_NAME: Final = "openai-responses"

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
"""What ``include`` always asks for: the reasoning items' sealed content, sent back next turn."""

CHAT_ONLY_OPTIONS: Final = frozenset(
    {
        "stream_options",
        "frequency_penalty",
        "presence_penalty",
        "seed",
        "logprobs",
        "logit_bias",
        "stop",
        "modalities",
        "prediction",
        "audio",
        "web_search_options",
    }
)
"""Options of the chat-completions wire the Responses API has no word for: not sent.

A plan that falls back from chat completions to the Responses API shares its
request options; these are dropped here rather than refused there.
"""

FOREIGN_OPTIONS: Final = frozenset({"top_k", "thinking", "stop_sequences", "thinking_config"})
"""Options of other providers' wires (Anthropic's, Gemini's) a shared plan may carry: not sent."""

# Arguments of `responses.create` passed through as they are.
_PASSED: Final = frozenset(
    {
        "temperature",
        "top_p",
        "top_logprobs",
        "parallel_tool_calls",
        "store",
        "metadata",
        "user",
        "service_tier",
        "truncation",
        "instructions",
        "reasoning",
        "max_tool_calls",
        "prompt_cache_key",
        "safety_identifier",
        "background",
        "previous_response_id",
        "conversation",
        "prompt",
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


def _user_content(content: object) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "input_text", "text": str(part.get("text", ""))})
            elif kind == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, Mapping) else image
                detail = image.get("detail") if isinstance(image, Mapping) else None
                converted: dict[str, Any] = {"type": "input_image", "detail": detail or "auto"}
                converted["image_url"] = url if isinstance(url, str) else ""
                parts.append(converted)
    return parts


def _assistant_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    state = provider_state_of(message, RESPONSES_NAME)
    call_items: Mapping[str, Any] = {}
    if state is not None:
        reasoning = state.get("reasoning")
        if isinstance(reasoning, list):
            items.extend(reasoning)  # as the API sent them: unchanged
        calls = state.get("calls")
        if isinstance(calls, Mapping):
            call_items = calls
    text = _text_of(message.get("content"))
    if text:
        items.append({"role": "assistant", "content": text})
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if not isinstance(function, Mapping):
            continue
        call_id = call.get("id")
        arguments = function.get("arguments")
        item: dict[str, Any] = {
            "type": "function_call",
            "call_id": call_id,
            "name": function.get("name"),
            "arguments": arguments if isinstance(arguments, str) else "",
        }
        item_id = call_items.get(call_id) if isinstance(call_id, str) else None
        if isinstance(item_id, str):
            # The API's id for the item, which ties it to its reasoning item.
            item["id"] = item_id
        items.append(item)
    return items


def _output_of(content: object) -> str:
    if isinstance(content, str):
        return content
    return _text_of(content)


def convert_input(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``input`` items of ``responses.create``, from a chat-completions transcript."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"))
            if text:
                items.append({"role": role, "content": text})
        elif role == "assistant":
            items.extend(_assistant_items(message))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": _output_of(message.get("content")),
                }
            )
        else:
            content = _user_content(message.get("content"))
            if content:
                items.append({"role": "user", "content": content})
    return items


def convert_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as Responses API function tools (flat, not nested)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(function, Mapping):
            out.append(dict(tool))  # a tool already in the Responses API's shape (web_search, ...)
            continue
        strict = function.get("strict") is True
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if strict:
            parameters = sanitize_tool_schema(parameters, dialect="openai_strict").schema
        converted: dict[str, Any] = {
            "type": "function",
            "name": function.get("name"),
            "parameters": parameters,
            "strict": strict,
        }
        if function.get("description"):
            converted["description"] = function["description"]
        out.append(converted)
    return out


def _tool_choice(value: object) -> object:
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        if isinstance(function, Mapping):
            return {"type": "function", "name": function.get("name")}
    return value


def _text_format(value: object) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    kind = value.get("type")
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
            return None
        strict = spec.get("strict") is True
        schema = spec["schema"]
        if strict:
            schema = sanitize_tool_schema(schema, dialect="openai_strict").schema
        out: dict[str, Any] = {
            "type": "json_schema",
            "name": spec.get("name") or "answer",
            "schema": schema,
            "strict": strict,
        }
        if spec.get("description"):
            out["description"] = spec["description"]
        return out
    if kind in ("json_object", "text"):
        return {"type": kind}
    return None


def request_arguments(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``responses.create`` arguments *options* mean.

    Chat-completions names are translated (``max_tokens`` and
    ``max_completion_tokens`` to ``max_output_tokens``, ``response_format``
    to ``text.format``, ``reasoning_effort`` to ``reasoning.effort``,
    ``verbosity`` to ``text.verbosity``, a named ``tool_choice`` flattened);
    ``store`` is ``False`` unless set (the transcript, not the API, keeps the
    conversation) and ``include`` always asks for the encrypted reasoning.
    """
    arguments: dict[str, Any] = {}
    extra_body: dict[str, Any] = {}
    text: dict[str, Any] = {}
    include: list[str] = []
    for key, value in options.items():
        if key in _PASSED:
            arguments[key] = value
        elif key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            arguments["max_output_tokens"] = value
        elif key == "tool_choice":
            arguments["tool_choice"] = _tool_choice(value)
        elif key == "response_format":
            text_format = _text_format(value)
            if text_format is not None:
                text["format"] = text_format
        elif key == "text" and isinstance(value, Mapping):
            text = {**value, **text}
        elif key == "verbosity":
            text["verbosity"] = value
        elif key == "reasoning_effort":
            reasoning = dict(arguments.get("reasoning") or {})
            reasoning.setdefault("effort", value)
            arguments["reasoning"] = reasoning
        elif key == "include" and isinstance(value, list | tuple):
            include.extend(str(v) for v in value)
        elif key not in CHAT_ONLY_OPTIONS and key not in FOREIGN_OPTIONS:
            extra_body[key] = value
    if text:
        arguments["text"] = text
    if ENCRYPTED_REASONING not in include:
        include.append(ENCRYPTED_REASONING)
    arguments["include"] = include
    arguments.setdefault("store", False)
    if extra_body:
        arguments["extra_body"] = {**extra_body, **dict(arguments.get("extra_body") or {})}
    return arguments
