"""The chat-completions transcript as a ``ConverseStream`` request, nothing lost coming back.

Converse wants its own shape: ``system`` beside the messages as text blocks;
roles strictly alternating, starting with a user message; a tool's answer a
``toolResult`` block in the *next* user message, every ``toolUse`` of the
assistant turn answered there; an assistant turn a list of blocks
(``reasoningContent``, ``text``, ``toolUse`` with its input as an object);
tools as ``toolConfig.tools[].toolSpec`` with the schema under
``inputSchema.json``. The conversion happens here, per request, and never
touches the transcript.

Reasoning blocks travel in the assistant message's ``provider_state``
(``{"provider": "bedrock", "reasoning": [...]}``) as Converse content blocks,
as the stream built them: ``{"reasoningContent": {"reasoningText": {"text",
"signature"}}}``, or ``{"reasoningContent": {"redactedContent": "<base64>"}}``
(bytes on the wire, base64 text in a transcript that must stay JSON). They go
back at the head of their turn, as they came: a model that signs its
reasoning (Claude on Bedrock) refuses a tool loop's next request without
them, or with them changed.
"""

from __future__ import annotations

import base64
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
    "SCHEMA_DIALECT",
    "STRUCTURED_OUTPUT_TOOL",
    "convert_messages",
    "convert_tools",
    "request_arguments",
    "structured_content",
]

NAME: Final = "bedrock"

STRUCTURED_OUTPUT_TOOL: Final = "final_result"
"""The tool a ``response_format`` JSON schema becomes (Converse has no JSON mode of its own)."""

SCHEMA_DIALECT: Final = "anthropic"
"""The dialect tool schemas are sanitized to: Converse hands ``inputSchema.json`` to the model, and
the Anthropic dialect (a plain object schema, no ``$schema``, no ``$ref``-only roots) is the one
every Converse tool-use model takes (Claude, Nova, Llama, Mistral on Bedrock)."""

OPENAI_ONLY_OPTIONS: Final = OPENAI_CHAT_ONLY_OPTIONS | {
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "parallel_tool_calls",
    "extra_headers",
    "extra_query",
    "extra_body",
    "timeout",
}
"""Options of the chat-completions wire (or of the OpenAI SDK) Converse has no word for: not sent.

A plan that falls back from OpenAI to Bedrock shares its request options;
these are dropped here rather than refused there.
"""

# ConverseStream's own request members, passed as they are (inferenceConfig and
# additionalModelRequestFields are merged with what the shared names set).
_CONVERSE: Final = frozenset(
    {
        "inferenceConfig",
        "additionalModelRequestFields",
        "additionalModelResponseFieldPaths",
        "guardrailConfig",
        "promptVariables",
        "requestMetadata",
        "performanceConfig",
        "serviceTier",
    }
)

_IMAGE_FORMATS: Final = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif"}
_IMAGE_FORMATS_MORE: Final = {"image/webp": "webp", "image/jpg": "jpeg"}


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


def _image(part: Mapping[str, Any]) -> dict[str, Any] | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None  # Converse takes image bytes (or S3), not a URL to fetch
    media, data = url[5:].split(";base64,", 1)
    kind = _IMAGE_FORMATS.get(media) or _IMAGE_FORMATS_MORE.get(media)
    if kind is None:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        return None
    return {"image": {"format": kind, "source": {"bytes": raw}}}


def _user_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text" and part.get("text"):
                blocks.append({"text": part["text"]})
            elif kind == "image_url":
                image = _image(part)
                if image is not None:
                    blocks.append(image)
    return blocks


def _tool_input(function: Mapping[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments")
    try:
        return parse_arguments(NAME, raw if isinstance(raw, str) or raw is None else None)
    except ToolCallArgumentsError:
        # A call made with broken arguments was answered with the error; the
        # API still needs an object here to pair with that answer.
        return {}


def reasoning_for_wire(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A kept reasoning block as Converse takes it back (redacted content as bytes again)."""
    content = block.get("reasoningContent")
    if not isinstance(content, Mapping):
        return None
    redacted = content.get("redactedContent")
    if isinstance(redacted, str):
        try:
            return {"reasoningContent": {"redactedContent": base64.b64decode(redacted)}}
        except ValueError:
            return None
    if isinstance(content.get("reasoningText"), Mapping):
        return {"reasoningContent": {"reasoningText": dict(content["reasoningText"])}}
    return None


def _assistant_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    state = provider_state_of(message, NAME)
    if state is not None:
        kept = state.get("reasoning")
        if isinstance(kept, list):
            for block in kept:
                if isinstance(block, Mapping):
                    wire = reasoning_for_wire(block)
                    if wire is not None:
                        blocks.append(wire)
    text = _text_of(message.get("content"))
    if text:
        blocks.append({"text": text})
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if not isinstance(function, Mapping):
            continue
        blocks.append(
            {
                "toolUse": {
                    "toolUseId": call.get("id"),
                    "name": function.get("name"),
                    "input": _tool_input(function),
                }
            }
        )
    return blocks


def convert_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system blocks, messages)`` for ``converse_stream``, from a chat-completions transcript."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"))
            if text:
                system.append({"text": text})
            continue
        if role == "assistant":
            blocks = _assistant_blocks(message)
            if not blocks:
                continue
            if out and out[-1]["role"] == "assistant":
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            content = message.get("content")
            text = content if isinstance(content, str) else _text_of(content)
            blocks = [
                {
                    "toolResult": {
                        "toolUseId": message.get("tool_call_id"),
                        "content": [{"text": text}],
                    }
                }
            ]
        else:
            blocks = _user_blocks(message.get("content"))
            if not blocks:
                continue
        # Tool results and the user's words after them are one user message:
        # Converse wants roles to alternate and every answer right after the calls.
        if out and out[-1]["role"] == "user":
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": "user", "content": blocks})
    return system, out


def _tool_spec(name: object, description: object, schema: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "inputSchema": {"json": sanitize_tool_schema(schema, dialect=SCHEMA_DIALECT).schema},
    }
    if description:
        spec["description"] = description
    return {"toolSpec": spec}


def convert_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as Converse ``toolSpec``s, in the anthropic dialect."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(function, Mapping):
            out.append(dict(tool))  # a tool already in Converse's shape ({"toolSpec": ...})
            continue
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(_tool_spec(function.get("name"), function.get("description"), parameters))
    return out


def _tool_choice(value: object) -> object:
    if value == "auto":
        return {"auto": {}}
    if value == "required":
        return {"any": {}}
    if value == "none":
        # Converse has no "none"; the tools stay offered (a history with
        # toolUse blocks is refused without a toolConfig), the choice the model's.
        return None
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        return {"tool": {"name": name}}
    return value


def _merged(into: dict[str, Any], key: str, value: object) -> None:
    if isinstance(value, Mapping):
        into[key] = {**dict(into.get(key) or {}), **value}
    else:
        into[key] = value


def request_arguments(
    options: Mapping[str, Any], tools: list[dict[str, Any]], max_tokens: int | None
) -> tuple[dict[str, Any], str | None]:
    """The ``converse_stream`` arguments *options* and *tools* mean, and the structured tool's name.

    *tools* (already converted) gets the structured-output tool appended when
    ``response_format`` asks for a JSON schema. Shared names map onto
    ``inferenceConfig`` (``max_tokens``, ``temperature``, ``top_p``, ``stop``)
    and ``toolConfig.toolChoice``; ``thinking`` and any other name Converse
    does not know go in ``additionalModelRequestFields``, where Bedrock hands
    model-specific fields to the model.
    """
    arguments: dict[str, Any] = {}
    inference: dict[str, Any] = {}
    model_fields: dict[str, Any] = {}
    structured: str | None = None
    tool_choice: Any = None
    for key, value in options.items():
        if key in ("max_tokens", "max_completion_tokens"):
            max_tokens = value
        elif key == "temperature":
            inference["temperature"] = value
        elif key == "top_p":
            inference["topP"] = value
        elif key == "stop":
            inference["stopSequences"] = [value] if isinstance(value, str) else list(value)
        elif key == "tool_choice":
            tool_choice = _tool_choice(value)
        elif key == "response_format":
            structured = _structured_tool(value, tools)
        elif key == "inferenceConfig" or key == "additionalModelRequestFields":
            _merged(arguments, key, value)
        elif key in _CONVERSE:
            arguments[key] = value
        elif key not in OPENAI_ONLY_OPTIONS:
            model_fields[key] = value
    if max_tokens is not None:
        inference["maxTokens"] = max_tokens
    if inference:
        arguments["inferenceConfig"] = {**inference, **dict(arguments.get("inferenceConfig") or {})}
    if model_fields:
        arguments["additionalModelRequestFields"] = {
            **model_fields,
            **dict(arguments.get("additionalModelRequestFields") or {}),
        }
    fields = arguments.get("additionalModelRequestFields")
    thinking = fields.get("thinking") if isinstance(fields, Mapping) else None
    thinking_on = isinstance(thinking, Mapping) and thinking.get("type") == "enabled"
    if structured is not None and tool_choice is None:
        # Forcing the tool is what makes the answer the schema's; Claude refuses
        # a forced tool with thinking on, where it is only offered.
        tool_choice = {"auto": {}} if thinking_on else {"tool": {"name": structured}}
    if tools:
        config: dict[str, Any] = {"tools": tools}
        if tool_choice is not None:
            config["toolChoice"] = tool_choice
        arguments["toolConfig"] = config
    return arguments, structured


def _structured_tool(value: object, tools: list[dict[str, Any]]) -> str | None:
    if not isinstance(value, Mapping) or value.get("type") != "json_schema":
        return None  # "text", or "json_object": no schema to give a tool
    spec = value.get("json_schema")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        return None
    description = (
        "Give your final answer by calling this tool, its input being the answer "
        f"({spec.get('name') or 'the requested structure'})."
    )
    tools.append(_tool_spec(STRUCTURED_OUTPUT_TOOL, description, spec["schema"]))
    return STRUCTURED_OUTPUT_TOOL


def structured_content(arguments: str) -> str:
    """The structured-output tool's input as the turn's content: the JSON text of the answer."""
    try:
        return json.dumps(json.loads(arguments or "{}"), separators=(",", ":"))
    except ValueError:
        return arguments
