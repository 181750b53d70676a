"""From MCP's shapes to this package's: tool names, argument checks, results, failures.

Pure functions, no I/O: what a server lists becomes a [MCPToolInfo][juno_bind_trio.mcp.MCPToolInfo],
what a call returns becomes the value the tool message is made of (cut to the
toolset's size cap), and what a call raises becomes a failure of the right kind.

``null`` for an optional argument means "not given", as it does for a local
``@tool``. OpenAI strict mode makes every property required, so an agent in
strict mode offers an optional MCP argument as required-and-nullable, and
the model writes ``null`` for the ones it leaves out. The server's own
schema refuses that ``null`` (``{"type": "number"}`` is not nullable), so when
arguments fail the server's schema they are checked once more with every
such ``null`` removed, and sent that way if they pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

import attrs
import jsonschema  # type: ignore[import-untyped]  # ships no type information; the SDK requires it
import mcp_types
import pydantic
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from juno_bind_trio._errors import MCPToolError, ToolFailureError
from juno_bind_trio._json import follow_ref
from juno_bind_trio._validate import error_kind, is_tool_name

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "MCPToolInfo"]

DEFAULT_MAX_RESULT_CHARS: Final = 100_000
"""The most characters of a result an MCP toolset hands the agent, by default.

A longer result is cut to this many characters and a line saying so is
appended, so the model knows it read only the start; see
[open_mcp_stdio][juno_bind_trio.mcp.open_mcp_stdio]'s ``max_result_chars``.
"""

# What the function-name rule of OpenAI-compatible APIs (which every tool offered
# to a model must satisfy: _validate.is_tool_name) leaves out of a name. MCP allows
# more (dots, slashes, 128 characters).
_NOT_IN_NAME: Final = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX: Final = re.compile(r"[A-Za-z0-9_-]{1,40}")


@attrs.frozen(kw_only=True)
class MCPToolInfo:
    """One tool an MCP server offers, as the model will see it.

    ``name`` is the name the model calls (the server's name, with the
    toolset's ``prefix`` and any character the model's function-name rule
    forbids replaced by ``_``); ``server_name`` is the server's own name for
    it, which calls are routed with. ``description`` and ``parameters`` (the
    JSON Schema of the arguments object) are the server's, unchanged: the
    agent rewrites ``parameters`` for the model's dialect when it builds the
    request. ``repeatable``, ``uses_idempotency_key`` and ``serial`` are what
    the toolset's options said for this tool.
    """

    name: str
    server_name: str
    description: str | None
    parameters: dict[str, Any]
    output_schema: dict[str, Any] | None
    repeatable: bool
    uses_idempotency_key: bool
    serial: bool


def check_prefix(where: str, prefix: object) -> str | None:
    if prefix is None:
        return None
    if not isinstance(prefix, str):
        raise TypeError(f"{where}: prefix must be None or a string, got {prefix!r}")
    if _PREFIX.fullmatch(prefix) is None:
        raise ValueError(
            f"{where}: prefix must be 1 to 40 letters, digits, '_' or '-', got {prefix!r}"
        )
    return prefix


def check_names(where: str, option: str, value: object) -> frozenset[str]:
    """A collection of tool names given as an option (a lone string is refused)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{where}: {option} must be a collection of tool names, got {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise error_kind(name, str)(
                f"{where}: {option} must hold non-empty tool-name strings, got {name!r}"
            )
    return frozenset(names)


def model_name(server_name: str, prefix: str | None) -> str:
    """The name the model calls a server's tool by; ``ValueError`` when none fits the rule."""
    base = _NOT_IN_NAME.sub("_", server_name)
    name = f"{prefix}_{base}" if prefix is not None else base
    if not is_tool_name(name):
        raise ValueError(
            f"the MCP tool {server_name!r} cannot be offered to a model: {name!r} is not 1 to "
            "64 letters, digits, '_' or '-' (the function-name rule of OpenAI-compatible APIs)"
        )
    return name


def convert_listing(
    where: str,
    server: str,
    tools: Iterable[mcp_types.Tool],
    *,
    prefix: str | None,
    non_repeatable: Collection[str],
    uses_idempotency_key: Collection[str],
    serial: Collection[str],
) -> tuple[MCPToolInfo, ...]:
    """Every listed tool as an [MCPToolInfo][juno_bind_trio.mcp.MCPToolInfo]; clashes refused."""
    infos: list[MCPToolInfo] = []
    by_name: dict[str, str] = {}
    for tool in tools:
        try:
            name = model_name(tool.name, prefix)
        except ValueError as exc:
            raise ValueError(f"{where}: server {server}: {exc}") from None
        if name in by_name:
            raise ValueError(
                f"{where}: server {server} lists tools {by_name[name]!r} and {tool.name!r}, "
                f"which would both be offered to the model as {name!r}"
            )
        by_name[name] = tool.name
        schema = tool.input_schema
        if schema.get("type", "object") != "object":
            raise ValueError(
                f"{where}: server {server}: the input schema of tool {tool.name!r} does not "
                f"describe an object (type {schema.get('type')!r}); function arguments are one"
            )
        infos.append(
            MCPToolInfo(
                name=name,
                server_name=tool.name,
                description=tool.description,
                parameters=json.loads(json.dumps(schema)),
                output_schema=tool.output_schema,
                repeatable=tool.name not in non_repeatable,
                uses_idempotency_key=tool.name in uses_idempotency_key,
                serial=tool.name in serial,
            )
        )
    for option, names in (
        ("non_repeatable", non_repeatable),
        ("uses_idempotency_key", uses_idempotency_key),
        ("serial", serial),
    ):
        unknown = sorted(set(names) - set(by_name.values()))
        if unknown:
            # A misspelt safety option must not pass silently: a tool the host
            # meant to protect from a second run would run twice.
            raise ValueError(
                f"{where}: {option} names tools server {server} does not list: {unknown}; "
                f"it lists {sorted(by_name.values())}"
            )
    return tuple(infos)


def _block_text(block: object) -> str:
    # `object`: a block type of a later protocol revision is described, not refused.
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, (mcp_types.ImageContent, mcp_types.AudioContent)):
        return f"[{block.type}: {block.mime_type}, {len(block.data)} base64 characters]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri}, {len(resource.blob)} base64 characters]"
    return f"[{getattr(block, 'type', 'content')}]"


def result_text(result: mcp_types.CallToolResult) -> str:
    """The content blocks of a result as one text: text as it is, other blocks described."""
    return "\n".join(_block_text(block) for block in result.content)


def truncated(text: str, max_chars: int) -> str:
    """*text*, or its first *max_chars* characters and a line that says it was cut."""
    if len(text) <= max_chars:
        return text
    return (
        text[:max_chars]
        + f"\n[the result was cut here: it had {len(text):,} characters, of which only the "
        f"first {max_chars:,} are shown]"
    )


def result_value(
    tool_name: str, result: mcp_types.CallToolResult, max_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> object:
    """What the tool returns to the agent for a server's result, or raises for ``isError``.

    Structured content, when the server sent it, is returned as it is (the
    agent writes it as compact JSON: the same data the text blocks usually
    repeat, in fewer tokens); otherwise the text of the content blocks.
    Either one longer than *max_chars* characters (the structured content
    measured as that compact JSON) is returned as text cut to *max_chars*,
    with a line saying how long it was; so is the error text of ``isError``.
    """
    if result.is_error:
        raise MCPToolError(
            truncated(
                result_text(result) or f"the MCP tool {tool_name!r} failed without saying why",
                max_chars,
            ),
            tool_name,
            result.structured_content,
        )
    if result.structured_content is not None:
        structured: object = result.structured_content
        try:
            compact = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):  # not JSON data: the agent's own encoding decides
            return structured
        if len(compact) > max_chars:
            return truncated(compact, max_chars)
        return structured
    return truncated(result_text(result), max_chars)


def failure_for(tool_name: str, exc: Exception) -> Exception:
    """The failure a call that raised *exc* is answered with.

    * The connection is gone or timed out (the server crashed, its process
      exited, the network failed): ``"external"`` — a service the tool
      depends on failed.
    * The server refused the arguments (JSON-RPC ``invalid params``):
      ``"validation"``.
    * The server answered with another protocol error: ``"external"``.
    * The server's answer could not be used (not the protocol's shape, or
      structured content that breaks the tool's own output schema):
      ``"system"`` — the server and this client do not agree, and asking
      again will not help.
    """
    if isinstance(exc, (MCPToolError, ToolFailureError)):
        return exc
    if isinstance(exc, MCPError):
        code = exc.error.code
        if code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            return ToolFailureError(
                "external",
                f"The MCP server behind tool {tool_name!r} is unavailable: {exc.error.message}.",
            )
        if code == INVALID_PARAMS:
            return ToolFailureError("validation", exc.error.message)
        return ToolFailureError(
            "external",
            f"The MCP server behind tool {tool_name!r} answered with an error: {exc.error.message}",
        )
    if isinstance(exc, (pydantic.ValidationError, RuntimeError, TypeError, ValueError)):
        return ToolFailureError(
            "system",
            f"The MCP server behind tool {tool_name!r} sent an answer that cannot be used: {exc}",
        )
    return ToolFailureError(
        "external",
        f"The MCP server behind tool {tool_name!r} could not be reached: "
        f"{type(exc).__name__}: {exc}",
    )


def check_arguments(where: str, arguments: object) -> dict[str, Any]:
    if not isinstance(arguments, Mapping):
        raise TypeError(f"{where}: arguments must be a mapping, got {arguments!r}")
    for key in arguments:
        if not isinstance(key, str):
            raise TypeError(f"{where}: argument names must be strings, got {key!r}")
    return dict(arguments)


class ArgumentCheck:
    """Checks a call's arguments against a tool's input schema before it is sent.

    A call the server would refuse is answered at once as a ``"validation"``
    failure naming every bad field, as a local tool's is, instead of a round
    trip that comes back as the server's free text. Arguments that fail only
    because of a ``null`` for an optional property whose schema refuses
    ``null`` (what a model in strict mode writes for "not given") pass with
    those ``null`` values removed, and are sent that way. A schema this validator
    cannot compile is left to the server to judge.
    """

    __slots__ = ("_schema", "_validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = schema
        self._validator: Any = None
        try:
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            cls.check_schema(schema)
            self._validator = cls(schema)
        except Exception:  # not a schema this validator understands: the server judges
            self._validator = None

    def _errors(self, arguments: dict[str, Any]) -> list[Any] | None:
        """The schema errors of *arguments*, sorted; ``None`` when the validator cannot tell."""
        try:
            return sorted(self._validator.iter_errors(arguments), key=_error_path)
        except Exception:  # a $ref that does not resolve, a bad regex, too deep: the server judges
            return None

    def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments to send: *arguments*, or them without absent ``null`` values."""
        if self._validator is None:
            return arguments
        errors = self._errors(arguments)
        if not errors:
            return arguments
        cleaned: dict[str, Any] = drop_absent_nulls(arguments, self._schema)
        if cleaned != arguments:
            second = self._errors(cleaned)
            if second is None or not second:
                return cleaned
            errors = second
        raise ToolFailureError(
            "validation", "; ".join(f"{_where(error)}: {error.message}" for error in errors)
        )


_MAX_SCHEMA_DEPTH: Final = 64


def _accepts_null(schema: object, root: Mapping[str, Any]) -> bool:
    """Whether *schema* may accept ``null``: true unless it plainly says it does not.

    Plainly: a ``type`` without ``"null"``, or an ``enum`` / ``const`` without
    ``None``, in the schema or in every branch of its ``anyOf`` / ``oneOf``.
    Anything it cannot read (a nesting deeper than it looks) counts as
    accepting, so such a ``null`` is left for the validator to judge.
    """
    pending: list[tuple[object, int]] = [(schema, 0)]
    while pending:
        node, depth = pending.pop()
        node = follow_ref(node, root)
        if not isinstance(node, Mapping) or depth > _MAX_SCHEMA_DEPTH:
            return True
        options = node.get("anyOf") or node.get("oneOf")
        if isinstance(options, list):
            pending.extend((option, depth + 1) for option in options)
            continue
        kind = node.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            return True
        if "enum" in node:
            enum = node["enum"]
            if isinstance(enum, list) and None in enum:
                return True
            continue
        if "const" in node:
            if node["const"] is None:
                return True
            continue
        if kind is None:
            return True  # unconstrained
    return False


def drop_absent_nulls(value: Any, schema: Mapping[str, Any]) -> Any:
    """A copy of *value* without the ``null`` of each optional property whose schema refuses it.

    Guided by *schema* at every depth (objects' ``properties``, arrays'
    ``items``, the ``anyOf`` / ``oneOf`` branch of the value's own type,
    local ``$ref`` pointers), and iterative, so arguments nested as deep as a JSON
    parser allows are walked without recursion. Nothing else changes.
    """
    out: list[Any] = [value]
    # (the value, its schema, the container the cleaned value goes in, its key there)
    pending: list[tuple[Any, object, Any, Any]] = [(value, schema, out, 0)]
    while pending:
        item, sub, parent, key = pending.pop()
        parent[key] = item
        sub = follow_ref(sub, schema)
        if not isinstance(sub, Mapping):
            continue
        options = sub.get("anyOf") or sub.get("oneOf")
        if isinstance(options, list) and isinstance(item, (dict, list)):
            wanted = "object" if isinstance(item, dict) else "array"
            for option in options:
                resolved = follow_ref(option, schema)
                if isinstance(resolved, Mapping) and resolved.get("type") == wanted:
                    pending.append((item, resolved, parent, key))
                    break
            continue
        if isinstance(item, dict):
            properties = sub.get("properties")
            if not isinstance(properties, Mapping):
                continue
            listed = sub.get("required")
            required = set(listed) if isinstance(listed, list) else set()
            cleaned: dict[str, Any] = {}
            parent[key] = cleaned
            for name, field in item.items():
                field_schema = properties.get(name)
                if field_schema is None:
                    cleaned[name] = field
                elif (
                    field is None
                    and name not in required
                    and not _accepts_null(field_schema, schema)
                ):
                    continue
                else:
                    cleaned[name] = field  # in its place; replaced by its cleaned copy below
                    pending.append((field, field_schema, cleaned, name))
        elif isinstance(item, list):
            items = sub.get("items")
            if isinstance(items, Mapping):
                copied = list(item)
                parent[key] = copied
                pending.extend((entry, items, copied, i) for i, entry in enumerate(item))
    return out[0]


def _error_path(error: Any) -> tuple[str, ...]:
    return tuple(str(part) for part in error.absolute_path)


def _where(error: Any) -> str:
    path = _error_path(error)
    return "/".join(path) if path else "(arguments)"
