"""The tool vocabulary: failure kinds, the envelope, ToolDef, ToolFailureError, SuspendDirective."""

from __future__ import annotations

import functools
import json
import pickle
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio import (
    ABORTED_TOOL_CALL_MESSAGE,
    INTERRUPTED_TOOL_CALL_MESSAGE,
    AbortedToolCallError,
    CompletionDefectError,
    InterruptedToolCallError,
    JunoBindError,
)
from juno_bind_trio.plugins import (
    TOOL_FAILURE_KINDS,
    SuspendDirective,
    ToolDef,
    ToolFailureError,
    ToolFailureKind,
    kind_for_error,
    tool_error_text,
    tool_failure_content,
    tool_failure_message,
)

# --- kinds ---------------------------------------------------------------------


def test_the_kinds_are_the_seeds_seven_plus_interrupted() -> None:
    seed = {"authz", "validation", "not_found", "conflict", "external", "not_run", "system"}
    assert seed | {"interrupted"} == TOOL_FAILURE_KINDS
    assert set(get_args(ToolFailureKind)) == TOOL_FAILURE_KINDS


def test_kind_for_error_tells_the_harness_facts_apart() -> None:
    assert kind_for_error(AbortedToolCallError("c1")) == "not_run"
    assert kind_for_error(InterruptedToolCallError("c1")) == "interrupted"


@pytest.mark.parametrize("kind", sorted(TOOL_FAILURE_KINDS))
def test_kind_for_error_reads_a_tool_failures_kind(kind: Any) -> None:
    assert kind_for_error(ToolFailureError(kind, "no")) == kind


def test_kind_for_error_reads_a_hosts_own_kind_attribute_only_when_valid() -> None:
    class HostError(Exception):
        def __init__(self, kind: object) -> None:
            super().__init__("host")
            self.kind = kind

    assert kind_for_error(HostError("conflict")) == "conflict"
    assert kind_for_error(HostError("conflcit")) is None
    assert kind_for_error(HostError(3)) is None
    # A kind from another vocabulary is not a tool failure kind.
    assert kind_for_error(CompletionDefectError("empty", "nothing")) is None
    assert kind_for_error(ValueError("plain")) is None


# --- the envelope --------------------------------------------------------------


# What the TypeScript loop writes for a refused call: JSON.stringify({success: false,
# kind: "not_run", error: ABORTED_TOOL_CALL_MESSAGE}), typed out here from the seed's
# own sentence rather than built from the package's constant, so both the sentence
# and JSON.stringify's compact form (no spaces, the em dash unescaped) are pinned.
SEED_REFUSAL = (
    '{"success":false,"kind":"not_run","error":"This call was never started, so nothing '
    "happened and nothing changed. The run is ending \u2014 do not retry it and do not "
    'report it as a failure."}'
)


def test_a_refusal_envelope_is_byte_for_byte_the_seeds() -> None:
    content = tool_failure_content(ABORTED_TOOL_CALL_MESSAGE, "not_run")
    assert content == SEED_REFUSAL
    assert list(json.loads(content)) == ["success", "kind", "error"]
    assert "\u2014" in content  # the em dash itself, not an escape
    assert tool_failure_message("c1", ABORTED_TOOL_CALL_MESSAGE, "not_run")["content"] == (
        SEED_REFUSAL
    )


def test_an_ordinary_failure_has_no_kind_key_at_all() -> None:
    assert tool_failure_content("boom") == '{"success":false,"error":"boom"}'


def test_the_tool_message_answers_its_call() -> None:
    assert tool_failure_message("call_9", "late", "interrupted") == {
        "role": "tool",
        "tool_call_id": "call_9",
        "content": '{"success":false,"kind":"interrupted","error":"late"}',
    }


@given(error=st.text(), kind=st.none() | st.sampled_from(sorted(TOOL_FAILURE_KINDS)))
def test_the_envelope_round_trips_any_text(error: str, kind: Any) -> None:
    decoded = json.loads(tool_failure_content(error, kind))
    expected: dict[str, Any] = {"success": False, "error": error}
    if kind is not None:
        expected["kind"] = kind
    assert decoded == expected


ENVELOPE: dict[str, Any] = {
    "tool_failure_content": tool_failure_content,
    "tool_failure_message": tool_failure_message,
}
KIND_MESSAGE = "kind must be None or one of"


@pytest.mark.parametrize(
    ("function", "args", "error", "message"),
    [
        ("tool_failure_content", (3,), TypeError, "error must be a string, got 3"),
        ("tool_failure_content", ("e", "fatal"), ValueError, KIND_MESSAGE),
        ("tool_failure_content", ("e", 1), TypeError, "kind must be None or a ToolFailureKind"),
        ("tool_failure_message", ("", "e"), ValueError, "tool_call_id must be a non-empty string"),
        ("tool_failure_message", ("c", None), TypeError, "error must be a string, got None"),
        ("tool_failure_message", ("c", "e", "nope"), ValueError, KIND_MESSAGE),
    ],
)
def test_the_envelope_refuses_bad_input_by_name(
    function: str, args: tuple[Any, ...], error: type, message: str
) -> None:
    with pytest.raises(error) as info:
        ENVELOPE[function](*args)
    assert str(info.value).startswith(f"{function}: {message}")


# --- ToolFailureError ----------------------------------------------------------


def test_a_tool_failure_carries_its_kind_and_message() -> None:
    error = ToolFailureError("validation", "amount must be positive")
    assert isinstance(error, JunoBindError)
    assert (error.kind, error.message, str(error)) == (
        "validation",
        "amount must be positive",
        "amount must be positive",
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.kind, copy.message) == (ToolFailureError, "validation", error.message)


def test_a_tool_failure_with_a_bad_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^ToolFailureError: kind must be one of .* got 'oops'$"):
        ToolFailureError("oops", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"got 'swapped kind'$"):
        ToolFailureError("swapped kind", "validation")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^ToolFailureError: message must be a string, got 5$"):
        ToolFailureError("system", 5)  # type: ignore[arg-type]


# --- ToolDef -------------------------------------------------------------------


async def handler(**arguments: Any) -> str:
    return "ok"


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def test_a_tool_def_with_defaults() -> None:
    tool = ToolDef(name="search", description="Find things.", parameters=SCHEMA, handler=handler)
    assert (tool.runs_serially, tool.idempotent) == (False, False)
    assert tool.to_openai_tool() == {
        "type": "function",
        "function": {"name": "search", "description": "Find things.", "parameters": SCHEMA},
    }


def test_a_tool_def_keeps_a_detached_copy_of_its_schema() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    tool = ToolDef(name="t", description="", parameters=schema, handler=handler)
    schema["properties"]["sneaky"] = {"type": "string"}
    assert tool.parameters == {"type": "object", "properties": {}}
    exported = tool.to_openai_tool()
    exported["function"]["parameters"]["properties"]["x"] = {}
    assert tool.parameters == {"type": "object", "properties": {}}


def test_async_callables_of_every_kind_are_handlers() -> None:
    class Callable:
        async def __call__(self) -> None:
            pass

    for fn in (handler, functools.partial(handler, q="x"), Callable()):
        assert ToolDef(name="t", description="", parameters={}, handler=fn).handler is fn


def test_tool_defs_compare_by_identity() -> None:
    a = ToolDef(name="t", description="", parameters={}, handler=handler)
    b = ToolDef(name="t", description="", parameters={}, handler=handler)
    assert a != b
    assert len({a, b}) == 2


def sync_handler() -> str:
    return "not async"


NAME_RULE = "name must be 1 to 64 letters"


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("name", "", ValueError, NAME_RULE),
        ("name", "has space", ValueError, NAME_RULE),
        ("name", "x" * 65, ValueError, NAME_RULE),
        ("name", None, ValueError, NAME_RULE),
        ("description", None, TypeError, "description must be a string, got None"),
        ("parameters", [], TypeError, "parameters must be a JSON-schema mapping, got []"),
        ("parameters", {"type": "array"}, ValueError, "parameters must describe an object"),
        ("parameters", {"default": {1, 2}}, TypeError, "parameters must be JSON-serialisable"),
        ("handler", sync_handler, TypeError, "handler must be an async function, got <function"),
        ("handler", "search", TypeError, "handler must be an async function, got 'search'"),
        ("runs_serially", 1, TypeError, "runs_serially must be a bool, got 1"),
        ("idempotent", "yes", TypeError, "idempotent must be a bool, got 'yes'"),
    ],
)
def test_a_bad_tool_def_is_refused_by_field(
    field: str, value: Any, error: type, message: str
) -> None:
    fields: dict[str, Any] = {
        "name": "t",
        "description": "d",
        "parameters": SCHEMA,
        "handler": handler,
        field: value,
    }
    with pytest.raises(error) as info:
        ToolDef(**fields)
    assert str(info.value).startswith(f"ToolDef: {message}")


# --- SuspendDirective ----------------------------------------------------------


def test_a_suspend_directive_names_its_open_call_and_why() -> None:
    payload: dict[str, Any] = {"question": "Approve 500 EUR?", "choices": ["yes", "no"]}
    directive = SuspendDirective(tool_call_id="call_3", reason="approval", payload=payload)
    payload["choices"].append("maybe")
    assert directive.payload == {"question": "Approve 500 EUR?", "choices": ["yes", "no"]}
    same = SuspendDirective(tool_call_id="call_3", reason="approval", payload=directive.payload)
    assert directive == same
    assert hash(directive) == hash(same)
    assert SuspendDirective(tool_call_id="c", reason="r").payload == {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tool_call_id": ""}, "tool_call_id must be a non-empty string, got ''"),
        ({"reason": None}, "reason must be a non-empty string, got None"),
        ({"payload": [1]}, "payload must be a mapping, got [1]"),
        ({"payload": {"at": float("nan")}}, "payload must be JSON-serialisable"),
    ],
)
def test_a_bad_suspend_directive_is_refused(fields: dict[str, Any], message: str) -> None:
    error = ValueError if fields == {"tool_call_id": ""} else TypeError  # "" is a wrong value
    with pytest.raises(error) as info:
        SuspendDirective(**{"tool_call_id": "c", "reason": "r", **fields})
    assert str(info.value).startswith(f"SuspendDirective: {message}")


# --- the text a tool error becomes -------------------------------------------------


class _StrFails(Exception):
    def __str__(self) -> str:
        raise RuntimeError("unprintable")


class _StrNotAString(Exception):
    def __str__(self) -> Any:
        return 42


class _KindFails(Exception):
    @property
    def kind(self) -> str:
        raise LookupError("no kind")


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (KeyError("city"), "KeyError: 'city'"),
        (ValueError("bad date"), "ValueError: bad date"),
        # An empty message: the type name (the TypeScript package writes "").
        (TimeoutError(), "TimeoutError"),
        (RuntimeError(""), "RuntimeError"),
        (_StrFails(), "_StrFails"),
        (_StrNotAString(), "_StrNotAString"),
        # The tool's own sentence, and the harness's, as they are.
        (ToolFailureError("validation", "date must be ISO 8601"), "date must be ISO 8601"),
        (ToolFailureError("conflict", ""), ""),
        (AbortedToolCallError("c1"), ABORTED_TOOL_CALL_MESSAGE),
        (InterruptedToolCallError("c1"), INTERRUPTED_TOOL_CALL_MESSAGE),
    ],
)
def test_tool_error_text(error: BaseException, text: str) -> None:
    assert tool_error_text(error) == text


def test_a_kind_that_raises_is_no_kind() -> None:
    assert kind_for_error(_KindFails()) is None


@given(st.text())
def test_tool_error_text_of_any_message_is_type_then_message(message: str) -> None:
    text = tool_error_text(ValueError(message))
    assert text == (f"ValueError: {message}" if message else "ValueError")


class _AsyncCall:
    async def __call__(self, **kwargs: Any) -> str:
        return "ok"


def test_a_tool_def_handler_may_be_a_partial_of_an_async_call() -> None:
    handler = functools.partial(_AsyncCall(), unit="C")
    tool = ToolDef(name="t", description="", parameters={}, handler=handler)
    assert tool.handler is handler
