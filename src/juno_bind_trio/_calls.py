"""One tool call, read once: its id, its tool, its raw arguments, and what they mean.

A tool call crosses the whole package on its way from the stream to the
transcript: the defect check, the loop, the pool, the tracing spans, the
receipt and idempotency keys, the dispatcher and the tool's own validation
all need it. Read separately, each of them would re-read the shape and
re-parse the arguments, and parse them by rules of its own. So the call is
built once, as a [`ToolCall`][juno_bind_trio.run.ToolCall], where it is
assembled (the stream's accumulator, or
[`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult] for a call a host
hands over), and every reader takes its fields from that one value: the
arguments are parsed the first time someone asks, under the one rule below,
and hashed the first time someone asks for the hash.

The arguments rule
------------------

The arguments of a tool call are text the model wrote, and models write
everything. Each shape has one answer:

| raw arguments | parsed | absent? |
| --- | --- | --- |
| `None` | `{}` | yes |
| `""` or only whitespace | `{}` | yes |
| `"null"` | `{}` | yes |
| `"{}"` | `{}` | no |
| `'{"q": "x"}'` | `{"q": "x"}` | no |
| `"[1, 2]"`, `"42"`, ... | `ToolCallArgumentsError` | no |
| malformed, `NaN`, `1e400` | the same error | no |
| nested past 500 levels | the same error | no |

* **Nothing, empty and ``null`` mean "no arguments".** Servers disagree on how
  to stream a call to a function without parameters: OpenAI sends ``"{}"``,
  others send nothing, an empty string or ``null``. All of them mean the same
  call, so all of them parse to the same empty object, and hash alike for a
  receipt. Whether that is acceptable is the tool's question (a tool with
  required parameters rejects it as it would reject ``{}``).
* **Anything other than a JSON object is refused.** A tool's parameters are
  an object in every tool-calling API; a bare array, string or number cannot
  be bound to named parameters, and guessing would dispatch a call the model
  did not make.
* **Only standard JSON that every party can hold.** ``NaN`` and ``Infinity``
  are refused although Python's `json` would accept them, because no other
  party on the wire would; so is a number past the largest double
  (``1e400``), and nesting deeper than the package's JSON depth limit. What
  parses here can be hashed for a receipt. Nothing is ever evaluated.

The refusal is a ``ToolCallArgumentsError``, a completion defect of kind
``"unparseable_tool_arguments"``: raised out of an attempt, routing retries
the endpoint; met by a dispatcher, it becomes a tool result that tells the
model what was wrong.

Fields a provider adds
----------------------

Some servers put fields of their own on a call that must come back with it
on the next request (Gemini's OpenAI-compatible endpoint puts the call's
``thought_signature`` in ``extra_content``, and refuses a history without
it). Whatever a call carries beyond ``id``, ``type`` and ``function`` is kept
in [`ToolCall.extra`][juno_bind_trio.run.ToolCall.extra] and written back by
[`to_wire()`][juno_bind_trio.run.ToolCall.to_wire], so the transcript holds
the call as the server sent it. ``index``, the position a streamed delta
names, is the stream's and never the call's.

The messages
------------

The assistant message that asks for calls and the tool message that answers
one have one builder each,
[`assistant_message()`][juno_bind_trio.run.assistant_message] and
[`tool_message()`][juno_bind_trio.run.tool_message]: the loop, the durable
run, the tracing spans, healing and the failure envelope all write them, and
a transcript reads the same whoever wrote it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NamedTuple, TypeAlias, final

from juno_bind_trio._errors import ToolCallArgumentsError
from juno_bind_trio._json import canonical, decode_strict_json, sha256_hex
from juno_bind_trio._validate import shown

__all__ = [
    "ToolCall",
    "ToolCallArguments",
    "arguments_absent",
    "assistant_message",
    "parse_arguments",
    "read_tool_call",
    "tool_message",
]

ToolCallArguments: TypeAlias = dict[str, Any]
"""A tool call's parsed arguments: a JSON object, as a ``dict``."""

# --- the arguments rule ------------------------------------------------------------

_PREVIEW: Final = 120


def _preview(raw: str) -> str:
    if len(raw) <= _PREVIEW:
        return repr(raw)
    return f"{raw[:_PREVIEW]!r}... ({len(raw)} characters)"


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "number"


def _check_raw(where: str, raw: object) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    raise TypeError(f"{where}: arguments must be a str or None, got {shown(raw)}")


def arguments_absent(where: str, raw: str | None) -> bool:
    """Whether *raw* carries no arguments at all: ``None``, blank, or ``"null"``."""
    text = _check_raw(where, raw)
    if text is None:
        return True
    stripped = text.strip()
    return stripped == "" or stripped == "null"


def _refusal(raw: str) -> str | ToolCallArguments:
    """*raw* parsed under the rule; or, for text it refuses, the refusal's detail."""
    stripped = raw.strip()
    if stripped == "" or stripped == "null":
        return {}
    try:
        value = decode_strict_json(stripped)
    # ValueError covers malformed JSON (JSONDecodeError), the NaN refusal and
    # integers past Python's digit limit; RecursionError is a pathologically
    # deep document. Both are the model's text being unusable, not our bug.
    except (ValueError, RecursionError) as exc:
        return f"tool-call arguments are not valid JSON ({exc}): {_preview(raw)}"
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"a JSON {_json_type(value)}"
        return f"tool-call arguments must be a JSON object, got {kind}: {_preview(raw)}"
    return value


def parse_arguments(where: str, raw: str | None) -> ToolCallArguments:
    """*raw* parsed under the rule (see this module), as a fresh ``dict``.

    :raises ToolCallArgumentsError: text the rule refuses.
    :raises TypeError: *raw* is not a string or ``None`` (*where* names the caller).
    """
    text = _check_raw(where, raw)
    if text is None:
        return {}
    parsed = _refusal(text)
    if isinstance(parsed, str):
        raise ToolCallArgumentsError(parsed, text)
    return parsed


# --- reading a call of either shape ---------------------------------------------------------


def _malformed(what: str, call: object) -> TypeError:
    return TypeError(
        f"{what}: expected a function tool call (the openai SDK's object, or a mapping "
        f'{{"id": str, "type": "function", "function": {{"name": str, "arguments": str}}}}), '
        f"got {call!r}"
    )


def _function_part(what: str, call: object) -> Any:
    """Return the ``function`` part of *call*, whichever shape it is."""
    if isinstance(call, Mapping):
        kind = call.get("type", "function")
        if kind != "function":
            raise _malformed(what, call)
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise _malformed(what, call)
        return function
    function = getattr(call, "function", None)
    # A custom tool call (type "custom") has no `function`: refusing it here is
    # what keeps it from being dispatched as if it were a function call.
    if function is None or getattr(call, "type", "function") != "function":
        raise _malformed(what, call)
    return function


def _field(what: str, call: object, part: object, name: str) -> str:
    value = part.get(name) if isinstance(part, Mapping) else getattr(part, name, None)
    if not isinstance(value, str):
        raise _malformed(what, call)
    return value


def read_tool_call(what: str, call: object) -> tuple[str, str, str]:
    """Return ``(id, name, arguments)`` of *call*; *what* names the caller in the error.

    Every accessor checks the whole shape, not just the field it returns: a
    call that is malformed anywhere is refused wherever it is first read,
    rather than half-used.

    :raises TypeError: *call* is not a well-formed function tool call.
    """
    if type(call) is ToolCall:
        return call._id, call._name, call._arguments
    # The fast path: a plain dict, as a transcript holds it. Exact type checks
    # cost a fraction of the Mapping ABC check.
    if type(call) is dict:
        try:
            function = call["function"]
            call_id = call["id"]
            name = function["name"]
            arguments = function["arguments"]
        except (KeyError, TypeError):
            pass  # the slow path below names the fault
        else:
            if (
                type(function) is dict
                and type(call_id) is str
                and type(name) is str
                and type(arguments) is str
                and call.get("type", "function") == "function"
            ):
                return call_id, name, arguments
    part = _function_part(what, call)
    call_id = call.get("id") if isinstance(call, Mapping) else getattr(call, "id", None)
    name = _field(what, call, part, "name")
    arguments = _field(what, call, part, "arguments")
    if not isinstance(call_id, str):
        raise _malformed(what, call)
    return call_id, name, arguments


# The members of a call that are the call itself; anything else on it is a provider's.
_CALL_KEYS: Final = frozenset({"id", "type", "function"})
# Not the call's: the position of a streamed delta, which a reassembled dict may keep.
_NOT_CARRIED: Final = frozenset({"id", "type", "function", "index"})


def _extra_of(call: object) -> dict[str, Any] | None:
    """The provider fields *call* carries besides the call itself, or ``None``."""
    if isinstance(call, Mapping):
        if _CALL_KEYS.issuperset(call):
            return None
        found = {key: value for key, value in call.items() if key not in _NOT_CARRIED}
    else:
        # The SDK's objects keep fields they do not model in `model_extra`.
        extra = getattr(call, "model_extra", None)
        if not isinstance(extra, Mapping) or not extra:
            return None
        found = {key: value for key, value in extra.items() if key not in _NOT_CARRIED}
    if not all(isinstance(key, str) for key in found):
        raise TypeError(f"ToolCall: a provider field's name must be a str, got {shown(found)}")
    return found or None


# --- the value --------------------------------------------------------------------------

_NO_EXTRA: Final[Mapping[str, Any]] = MappingProxyType({})
_UNSET: Final[Any] = object()


class _Function(NamedTuple):
    """``call.function``, read by attribute as the openai SDK's call has it."""

    name: str
    arguments: str


def _check_text(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"ToolCall: {where} must be a str, got {shown(value)}")
    return value


@final
class ToolCall(Mapping[str, Any]):
    """One function tool call, built once and read by everyone: the harness's own value.

    ``ToolCall(id, name, arguments, extra=...)``, or
    [`ToolCall.of(call)`][juno_bind_trio.run.ToolCall.of] from either shape a
    call arrives in. Immutable.

    * *id*: the call's id (a non-empty string), which its answer names;
    * *name*: the tool it asks for;
    * *arguments*: the raw JSON text as the model sent it;
    * *extra*: fields a provider put on the call that must be sent back with
      it (Gemini's ``extra_content``), read-only;
    * [`parsed`][juno_bind_trio.run.ToolCall.parsed]: the arguments as a
      ``dict``, parsed the first time it is read, under the package's one
      rule (blank, ``null`` and no arguments are ``{}``; anything but a JSON
      object is a ``ToolCallArgumentsError``);
    * [`digest`][juno_bind_trio.run.ToolCall.digest]: the SHA-256 of the
      parsed arguments' canonical JSON (of the raw text, for arguments the
      rule refuses), computed the first time it is read: what receipt and
      idempotency keys hold.

    It reads as the wire mapping (``call["id"]``, ``call["function"]["arguments"]``,
    ``dict(call)``) and as the openai SDK's object (``call.id``,
    ``call.function.name``), so a host's dispatcher written for either keeps
    working. [`to_wire()`][juno_bind_trio.run.ToolCall.to_wire] gives the
    plain dict a transcript holds. Two calls are equal when their wire forms are.
    """

    __slots__ = ("_arguments", "_digest", "_extra", "_id", "_name", "_parsed")

    def __init__(
        self, id: str, name: str, arguments: str = "", *, extra: Mapping[str, Any] | None = None
    ) -> None:
        if not _check_text("id", id):
            raise ValueError("ToolCall: id must be a non-empty string, got ''")
        self._id = id
        self._name = _check_text("name", name)
        self._arguments = _check_text("arguments", arguments)
        self._extra = _NO_EXTRA if extra is None else _checked_extra(extra)
        self._parsed: Any = _UNSET
        self._digest: str | None = None

    @classmethod
    def of(cls, call: object) -> ToolCall:
        """*call* as a ``ToolCall``: itself if it is one, else read from the openai SDK's
        object or a wire mapping, keeping its provider fields in ``extra``.

        :raises TypeError: *call* is not a well-formed function tool call.
        :raises ValueError: its id is empty.
        """
        if type(call) is cls:
            return call
        call_id, name, arguments = read_tool_call("ToolCall.of", call)
        made = cls.__new__(cls)
        if not call_id:
            raise ValueError(f"ToolCall.of: a tool call has an empty id: {shown(call)}")
        made._id = call_id
        made._name = name
        made._arguments = arguments
        extra = _extra_of(call)
        made._extra = _NO_EXTRA if extra is None else MappingProxyType(extra)
        made._parsed = _UNSET
        made._digest = None
        return made

    # --- the fields ----------------------------------------------------------------

    @property
    def id(self) -> str:
        """The call's id, which its answer's ``tool_call_id`` names."""
        return self._id

    @property
    def name(self) -> str:
        """The name of the tool the call asks for."""
        return self._name

    @property
    def arguments(self) -> str:
        """The raw arguments, exactly as the model sent them."""
        return self._arguments

    @property
    def extra(self) -> Mapping[str, Any]:
        """Fields a provider put on the call beside ``id``, ``type`` and ``function``."""
        return self._extra

    @property
    def type(self) -> str:
        """Always ``"function"``, as the wire and the SDK say it."""
        return "function"

    @property
    def function(self) -> _Function:
        """``(name, arguments)``, readable as ``call.function.name``, as on the SDK's object."""
        return _Function(self._name, self._arguments)

    @property
    def parsed(self) -> ToolCallArguments:
        """The arguments as a ``dict``: parsed once, on first read, under the one rule.

        The same ``dict`` every time, shared by every reader of the call (the
        receipt key, the dispatcher, the tool's validation): read it, do not
        change it.

        :raises ToolCallArgumentsError: the arguments are not a JSON object
            (raised afresh on every read; the text is parsed once).
        """
        parsed = self._parsed
        if parsed is _UNSET:
            parsed = self._parsed = _refusal(self._arguments)
        if type(parsed) is str:
            raise ToolCallArgumentsError(parsed, self._arguments)
        result: ToolCallArguments = parsed
        return result

    @property
    def digest(self) -> str:
        """SHA-256 (lowercase hex) of the parsed arguments' canonical JSON, computed once.

        Key order and whitespace do not change it, and ``""``, ``"null"`` and
        ``"{}"`` give one digest. Arguments the rule refuses are hashed as
        their raw text, so a malformed call still has a stable key.
        """
        digest = self._digest
        if digest is None:
            parsed = self._parsed
            if parsed is _UNSET:
                parsed = self._parsed = _refusal(self._arguments)
            # A refused text hashes as that text (a JSON string); a parsed one as
            # its object: the two can never share a digest.
            value = self._arguments if type(parsed) is str else parsed
            digest = self._digest = sha256_hex(canonical(value, "ToolCall.digest").encode())
        return digest

    def to_wire(self) -> dict[str, Any]:
        """The call as a chat-completions message holds it: a fresh plain ``dict``.

        ``{"id", "type": "function", "function": {"name", "arguments"}}``, then
        the provider fields of ``extra``.
        """
        wire: dict[str, Any] = {
            "id": self._id,
            "type": "function",
            "function": {"name": self._name, "arguments": self._arguments},
        }
        if self._extra:
            wire.update(self._extra)
        return wire

    # --- the mapping it reads as ---------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        if key == "id":
            return self._id
        if key == "function":
            return {"name": self._name, "arguments": self._arguments}
        if key == "type":
            return "function"
        return self._extra[key]

    def __contains__(self, key: object) -> bool:
        return key in _CALL_KEYS or key in self._extra

    def __iter__(self) -> Iterator[str]:
        yield "id"
        yield "type"
        yield "function"
        yield from self._extra

    def __len__(self) -> int:
        return 3 + len(self._extra)

    def __eq__(self, other: object) -> bool:
        if type(other) is ToolCall:
            return (
                self._id == other._id
                and self._name == other._name
                and self._arguments == other._arguments
                and self._extra == other._extra
            )
        if isinstance(other, Mapping):
            return self.to_wire() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping, compared by value

    def __repr__(self) -> str:
        extra = f", extra={dict(self._extra)!r}" if self._extra else ""
        return (
            f"ToolCall(id={self._id!r}, name={self._name!r}, arguments={self._arguments!r}{extra})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._id, self._name, self._arguments, dict(self._extra)))


def _rebuild(call_id: str, name: str, arguments: str, extra: dict[str, Any]) -> ToolCall:
    return ToolCall(call_id, name, arguments, extra=extra or None)


def _checked_extra(given: object) -> Mapping[str, Any]:
    if not isinstance(given, Mapping):
        raise TypeError(f"ToolCall: extra must be a mapping or None, got {shown(given)}")
    extra = dict(given)
    for key in extra:
        if not isinstance(key, str):
            raise TypeError(f"ToolCall: an extra field's name must be a str, got {shown(key)}")
        if key in _NOT_CARRIED:
            raise ValueError(
                f"ToolCall: extra cannot hold {key!r}; it holds a provider's fields beside "
                "id, type and function"
            )
    return MappingProxyType(extra) if extra else _NO_EXTRA


# --- the two messages ---------------------------------------------------------------------

_MESSAGE_KEYS: Final = frozenset({"role", "content", "tool_calls"})


def assistant_message(
    content: str | None, calls: Sequence[object] = (), /, **extra: Any
) -> dict[str, Any]:
    """The assistant message of a turn: its text, the calls it asks for, a provider's fields.

    ``{"role": "assistant", "content": content, "tool_calls": [...]}``, each
    call in its wire form (see [`ToolCall.to_wire()`][juno_bind_trio.run.ToolCall.to_wire];
    a call may be a ``ToolCall`` or either shape
    [`ToolCall.of()`][juno_bind_trio.run.ToolCall.of] reads). With no calls
    there is no ``tool_calls`` key: the chat-completions API refuses an empty
    list. *extra* are fields a provider put on the message that must go back
    with it (``reasoning_content``), after the rest.

    :raises TypeError: *content* is not a str or None, or a call is malformed.
    :raises ValueError: *extra* names ``role``, ``content`` or ``tool_calls``.
    """
    given: object = content
    if given is not None and not isinstance(given, str):
        raise TypeError(f"assistant_message: content must be a str or None, got {shown(given)}")
    clash = _MESSAGE_KEYS.intersection(extra)
    if clash:
        raise ValueError(
            f"assistant_message: extra fields cannot be named {sorted(clash)!r}; those are the "
            "message's own"
        )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
        raise TypeError(
            f"assistant_message: calls must be a sequence of tool calls, got {shown(calls)}"
        )
    if calls:
        wire: list[dict[str, Any]] = []
        for call in calls:
            try:
                made = ToolCall.of(call)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"assistant_message: {exc}") from None
            wire.append(made.to_wire())
        message["tool_calls"] = wire
    if extra:
        message.update(extra)
    return message


def tool_message(call_id: str, content: str | list[Any]) -> dict[str, Any]:
    """The tool message answering call *call_id* with *content* (text, or a list of parts).

    ``{"role": "tool", "tool_call_id": call_id, "content": content}``.

    :raises TypeError: *call_id* is not a str, or *content* neither a str nor a list.
    :raises ValueError: *call_id* is empty.
    """
    given: object = call_id
    if type(given) is not str:
        raise TypeError(f"tool_message: call_id must be a str, got {shown(given)}")
    if not call_id:
        raise ValueError("tool_message: call_id must not be empty")
    text: object = content
    if type(text) is not str and not isinstance(text, str | list):
        raise TypeError(
            f"tool_message: content must be a str or a list of content parts, got {shown(text)}"
        )
    return {"role": "tool", "tool_call_id": call_id, "content": content}
