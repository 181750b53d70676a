"""The chat-completions transcript as a Gemini ``generateContent`` request, signatures kept.

The transcript every layer reads is the chat-completions shape; Gemini wants
another: the system prompt beside the contents (``system_instruction``);
roles ``user`` and ``model`` only; a tool's answer is a ``functionResponse``
part *in a user turn*, right after the ``functionCall`` turn, as many answers
as calls, each naming its function (Gemini pairs them by name and order, and
by ``id`` only where it gave one); arguments an object, not text.

Thought signatures travel in the assistant message's ``provider_state``
(``{"provider": "google", ...}``), base64 text of the bytes Gemini sent:
``"calls"`` the signature of each call that had one, by call id;
``"text"`` the one on the turn's text; ``"thoughts"`` signed thought parts;
``"ids"`` the call ids Gemini gave itself (the others were made up here, and
are not sent). Gemini 3 refuses a tool loop's next request when a call of the
current turn comes back without the signature it came with, or with another,
so they are sent back as they came: decoded to the same bytes, on the same
call, and nothing is added where Gemini put none. A model turn with calls and
no state of Gemini's (the calls came from another provider, before a
fallback) gets the dummy signature the API documents for history it did not
sign on its first call, which it accepts.
Text and calls are rebuilt from the message itself, so a transcript healed or
edited stays the one truth for what was said and asked.
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
    "CONFIG_OPTIONS",
    "FOREIGN_CALL_SIGNATURE",
    "NAME",
    "OPENAI_ONLY_OPTIONS",
    "SCHEMA_DIALECT",
    "convert_messages",
    "convert_tools",
    "request_config",
]

NAME: Final = "google"
SCHEMA_DIALECT: Final = "gemini"
"""The schema dialect tool parameters and response schemas are rewritten to."""

FOREIGN_CALL_SIGNATURE: Final = b"skip_thought_signature_validator"
"""The signature the Gemini API documents for function calls it did not issue (history from
another provider): put on the first call of a model turn that has none of its own."""

CONFIG_OPTIONS: Final = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "candidate_count",
        "stop_sequences",
        "thinking_config",
        "safety_settings",
        "cached_content",
        "labels",
        "media_resolution",
        "response_modalities",
        "response_mime_type",
        "response_schema",
        "response_json_schema",
        "response_logprobs",
        "speech_config",
        "image_config",
        "service_tier",
        "model_selection_config",
        "routing_config",
        "tool_config",
    }
)
"""Options that are ``GenerateContentConfig`` fields of the same name: passed as they are."""

OPENAI_ONLY_OPTIONS: Final = OPENAI_CHAT_ONLY_OPTIONS | {"parallel_tool_calls"}
"""Options of the chat-completions wire Gemini has no word for (or another meaning): not sent.

A plan that falls back from OpenAI to Gemini shares its request options;
these are dropped here rather than refused there.
"""


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
        return {"inline_data": {"mime_type": media, "data": base64.b64decode(data)}}
    return {"file_data": {"file_uri": url}}


def _user_parts(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text" and part.get("text"):
                parts.append({"text": part["text"]})
            elif kind == "image_url":
                parts.append(_image(part))
    return parts


def _arguments(function: Mapping[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments")
    try:
        return parse_arguments("gemini", raw if isinstance(raw, str) or raw is None else None)
    except ToolCallArgumentsError:
        # A call the model made with broken arguments was answered with the
        # error; the API still needs an object here to pair with that answer.
        return {}


def _signature(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        return None  # edited by hand: read as none


def _model_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    own = provider_state_of(message, NAME)
    state = own or {}
    signed = state.get("calls")
    signed = signed if isinstance(signed, Mapping) else {}
    own_ids = state.get("ids")
    own_ids = set(own_ids) if isinstance(own_ids, list) else set()
    parts: list[dict[str, Any]] = []
    thoughts = state.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else ():
        if isinstance(thought, Mapping):
            signature = _signature(thought.get("signature"))
            if signature is not None:
                parts.append(
                    {
                        "text": str(thought.get("text", "")),
                        "thought": True,
                        "thought_signature": signature,
                    }
                )
    text = _text_of(message.get("content"))
    text_signature = _signature(state.get("text"))
    if text or text_signature is not None:
        part: dict[str, Any] = {"text": text}
        if text_signature is not None:
            part["thought_signature"] = text_signature
        parts.append(part)
    first_call = True
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        call_id = call.get("id")
        function_call: dict[str, Any] = {
            "name": function.get("name"),
            "args": _arguments(function),
        }
        if call_id in own_ids:
            function_call["id"] = call_id
        part = {"function_call": function_call}
        signature = _signature(signed.get(call_id)) if isinstance(call_id, str) else None
        if signature is None and first_call and own is None:
            # Not Gemini's turn (or its state was lost): the documented stand-in.
            signature = FOREIGN_CALL_SIGNATURE
        if signature is not None:
            part["thought_signature"] = signature
        first_call = False
        parts.append(part)
    return parts


def _response_of(content: object) -> dict[str, Any]:
    text = content if isinstance(content, str) else _text_of(content)
    return {"result": text}


def convert_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system instruction, contents)`` for ``generate_content_stream``, from a transcript."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    # Each call's function name and whether its id is Gemini's, by call id:
    # a function response must name its function.
    calls: dict[str, tuple[str, bool]] = {}
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"))
            if text:
                system.append(text)
            continue
        if role == "assistant":
            parts = _model_parts(message)
            for part in parts:
                function_call = part.get("function_call")
                if function_call is not None and "id" in function_call:
                    calls[function_call["id"]] = (str(function_call["name"] or ""), True)
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, Mapping) else None
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and isinstance(call_id, str):
                    calls.setdefault(call_id, (str(function.get("name") or ""), False))
            if not parts:
                continue
            if out and out[-1]["role"] == "model":
                out[-1]["parts"].extend(parts)
            else:
                out.append({"role": "model", "parts": parts})
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            known = calls.get(call_id) if isinstance(call_id, str) else None
            name, sent_id = known if known is not None else ("", False)
            response: dict[str, Any] = {
                "name": name or str(message.get("name") or "unknown"),
                "response": _response_of(message.get("content")),
            }
            if sent_id:
                response["id"] = call_id
            parts = [{"function_response": response}]
        else:
            parts = _user_parts(message.get("content"))
            if not parts:
                continue
        # Function responses and the user's words after them are one user turn:
        # the API wants every answer in the turn right after the calls.
        if out and out[-1]["role"] == "user":
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": "user", "parts": parts})
    return ("\n\n".join(system) if system else None), out


def convert_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as one Gemini ``Tool`` of function declarations.

    Parameters are rewritten to the ``gemini`` schema dialect. A tool already in
    Gemini's shape (``google_search``, ``code_execution``, ...) is passed as it is.
    """
    declarations: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(function, Mapping):
            out.append(dict(tool))
            continue
        declaration: dict[str, Any] = {"name": function.get("name")}
        if function.get("description"):
            declaration["description"] = function["description"]
        parameters = function.get("parameters")
        if isinstance(parameters, Mapping) and parameters.get("properties"):
            declaration["parameters"] = sanitize_tool_schema(
                parameters, dialect=SCHEMA_DIALECT
            ).schema
        declarations.append(declaration)
    if declarations:
        out.insert(0, {"function_declarations": declarations})
    return out


def _tool_config(value: object) -> dict[str, Any] | None:
    if value == "auto":
        return {"function_calling_config": {"mode": "AUTO"}}
    if value == "required":
        return {"function_calling_config": {"mode": "ANY"}}
    if value == "none":
        return {"function_calling_config": {"mode": "NONE"}}
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        return {"function_calling_config": {"mode": "ANY", "allowed_function_names": [name]}}
    return None


def _structured(config: dict[str, Any], value: object) -> None:
    if not isinstance(value, Mapping):
        return
    kind = value.get("type")
    if kind == "json_object":
        config["response_mime_type"] = "application/json"
        return
    spec = value.get("json_schema")
    if kind != "json_schema" or not isinstance(spec, Mapping):
        return
    schema = spec.get("schema")
    config["response_mime_type"] = "application/json"
    if isinstance(schema, Mapping):
        config["response_schema"] = sanitize_tool_schema(schema, dialect=SCHEMA_DIALECT).schema


def request_config(
    options: Mapping[str, Any],
    *,
    system: str | None,
    tools: list[dict[str, Any]],
    max_tokens: int | None,
) -> dict[str, Any]:
    """The ``GenerateContentConfig`` (as a dict) *options* mean, with the system and tools.

    ``response_format`` becomes Gemini's own structured output: JSON as the
    response type and, for a JSON schema, that schema in the ``gemini`` dialect.
    """
    config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
    extra_body: dict[str, Any] = {}
    tool_config: dict[str, Any] | None = None
    for key, value in options.items():
        if key in CONFIG_OPTIONS:
            config[key] = value
        elif key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            max_tokens = value
        elif key == "stop":
            config["stop_sequences"] = [value] if isinstance(value, str) else list(value)
        elif key == "tool_choice":
            tool_config = _tool_config(value)
        elif key == "response_format":
            _structured(config, value)
        elif key not in OPENAI_ONLY_OPTIONS:
            extra_body[key] = value
    if max_tokens is not None:
        config["max_output_tokens"] = max_tokens
    if system:
        config["system_instruction"] = system
    if tools:
        config["tools"] = tools
        if tool_config is not None and "tool_config" not in config:
            config["tool_config"] = tool_config
    if extra_body:
        config["http_options"] = {"extra_body": extra_body}
    return config


def arguments_text(args: object) -> str:
    """A function call's ``args`` object as the transcript's arguments text."""
    return json.dumps(args if args is not None else {}, separators=(",", ":"))
