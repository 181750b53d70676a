"""What a tool is: its name, description, schema and handler, checked where it is defined.

The failure kinds and the envelope a failed call is answered with live below every
subpackage (``juno_bind_trio._errors``, ``juno_bind_trio._failures``), so the transcript's
healing and the pool write the same bytes without importing this subpackage; they are
re-exported here, their public home.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import attrs

from juno_bind_trio._errors import TOOL_FAILURE_KINDS, ToolFailureKind
from juno_bind_trio._failures import (
    kind_for_error,
    tool_error_text,
    tool_failure_content,
    tool_failure_message,
)
from juno_bind_trio._validate import is_async_callable, is_tool_name

__all__ = [
    "TOOL_FAILURE_KINDS",
    "ToolDef",
    "ToolFailureKind",
    "ToolHandler",
    "kind_for_error",
    "tool_error_text",
    "tool_failure_content",
    "tool_failure_message",
]

ToolHandler = Callable[..., Awaitable[Any]]
"""An async callable that executes a tool; the host's dispatcher decides its arguments
(typically the parsed call arguments)."""


def _check_name(given: str) -> str:
    name: object = given  # checked at run time, whatever the type says
    if not is_tool_name(name):
        raise ValueError(
            "ToolDef: name must be 1 to 64 letters, digits, '_' or '-' "
            f"(the function-name rule of OpenAI-compatible APIs), got {name!r}"
        )
    return name


def _check_description(given: str) -> str:
    description: object = given  # checked at run time, whatever the type says
    if not isinstance(description, str):
        raise TypeError(f"ToolDef: description must be a string, got {description!r}")
    return description


def _check_parameters(given: Mapping[str, Any]) -> dict[str, Any]:
    parameters: object = given  # checked at run time, whatever the type says
    if not isinstance(parameters, Mapping):
        raise TypeError(f"ToolDef: parameters must be a JSON-schema mapping, got {parameters!r}")
    # Function parameters are always an object: a schema of any other type is
    # rejected by every provider, at request time.
    if parameters.get("type", "object") != "object":
        raise ValueError(
            "ToolDef: parameters must describe an object "
            f'(type "object"), got type {parameters.get("type")!r}'
        )
    # A JSON round trip both proves the schema can be sent and detaches it
    # from the caller's dict, so a later edit there cannot change this tool.
    try:
        copied: dict[str, Any] = json.loads(json.dumps(parameters, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"ToolDef: parameters must be JSON-serialisable ({exc}), got {parameters!r}"
        ) from None
    return copied


def _check_handler(given: ToolHandler) -> ToolHandler:
    handler: object = given  # checked at run time, whatever the type says
    if not is_async_callable(handler):
        # A sync function that slips through would fail on every call, as a
        # tool failure far from here; refuse it where the tool is defined.
        raise TypeError(f"ToolDef: handler must be an async function, got {handler!r}")
    return cast("ToolHandler", handler)


def _check_runs_serially(given: bool) -> bool:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, bool):
        raise TypeError(f"ToolDef: runs_serially must be a bool, got {value!r}")
    return value


def _check_idempotent(given: bool) -> bool:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, bool):
        raise TypeError(f"ToolDef: idempotent must be a bool, got {value!r}")
    return value


@attrs.frozen(kw_only=True, eq=False)
class ToolDef:
    """A tool a model may call: its name, description, argument schema and handler.

    ``ToolDef(name=..., description=..., parameters=..., handler=...,
    runs_serially=False, idempotent=False)``, every field checked here.

    *parameters* is the JSON schema of the arguments (an ``"object"``
    schema); a detached copy is kept. *handler* is an async callable.

    *runs_serially*: calls to this tool must run one at a time, before the
    rest of the batch (an activation that changes which tools exist, a tool
    that is not safe to run alongside itself). The loop's ``runs_serially``
    predicate can read it.

    *idempotent*: its effect is safe to repeat. What a resumed run may do
    with a call left ``"interrupted"``: repeat an idempotent one, and check
    any other before repeating it.

    Compared and hashed by identity: two definitions with equal fields are
    still two tools.
    """

    name: str = attrs.field(converter=_check_name)
    description: str = attrs.field(converter=_check_description)
    parameters: dict[str, Any] = attrs.field(converter=_check_parameters)
    handler: ToolHandler = attrs.field(converter=_check_handler)
    runs_serially: bool = attrs.field(default=False, converter=_check_runs_serially)
    idempotent: bool = attrs.field(default=False, converter=_check_idempotent)

    def to_openai_tool(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry, ``{"type": "function", "function": {…}}``.

        Built fresh each time (the schema is copied too), so a caller may
        edit the result; provider dialects are ``juno_bind_trio.schema``'s job.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }
