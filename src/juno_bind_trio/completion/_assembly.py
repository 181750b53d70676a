"""Assembling streamed tool calls from their deltas.

A streamed chat completion sends each tool call in pieces, keyed by an
``index``: the id, type and function name arrive once (usually on the call's
first delta), the arguments arrive as string fragments to concatenate, and a
model making parallel calls may interleave the pieces of several calls. The
accumulator keys everything by index, so any fragmentation and any
interleaving of the same calls assembles to the same calls.

What it tolerates, and why
--------------------------

OpenAI-compatible servers differ in small ways, and a harness that routes
across several of them meets all of the differences. Tolerated, because the
meaning is unambiguous:

* an id, name or type **repeated** on later deltas of the same call (some
  servers send them on every delta);
* an **empty** id, name or type on later deltas (``"id": ""`` is how some
  servers say "no id on this delta");
* a delta **without an index**, which some compatibility layers send: it
  continues the call touched last, unless it carries an id that call does not
  have, in which case it opens the next call;
* indices that do not start at 0 or skip a number: order is by index;
* **fields of its own** on a call (Gemini's OpenAI-compatible endpoint puts a
  call's ``thought_signature`` in ``extra_content``, and refuses the next
  request without it): kept, and carried on the finished call as
  [`ToolCall.extra`][juno_bind_trio.run.ToolCall.extra], so the call goes
  back as it came. A string continues what was held (appended, as the
  arguments are), a list extends it, any other value replaces it.

Refused with [`ToolCallAssemblyError`][juno_bind_trio.ToolCallAssemblyError], because going on
would glue two calls together or dispatch a call nobody made:

* a second, **different** id or name for an index;
* a tool type other than ``"function"``;
* a field of the wrong type (an index that is not a non-negative integer,
  arguments that are not a string).

The error is a [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], so routing
treats it like any other unusable completion and retries within the defect
budget.

Reading it mid-stream
---------------------

[`ToolCallAccumulator.assembled()`][juno_bind_trio.completion.ToolCallAccumulator.assembled] may be
called at any time and returns what is known so far, for a host that renders a call while it is
assembled (the TypeScript README's suggestion).
[`ToolCallAccumulator.tool_calls()`][juno_bind_trio.completion.ToolCallAccumulator.tool_calls]
builds each finished call once, as the [`ToolCall`][juno_bind_trio.run.ToolCall] every later reader
takes its fields from, and
[`ToolCallAccumulator.calls()`][juno_bind_trio.completion.ToolCallAccumulator.calls] returns the
same calls in the chat-completions message shape; both refuse a call that still lacks its id or
name.

To show the arguments as they stream, pass ``on_delta``: it is called after
each delta is folded in, with the call's resolved index (a delta without one
included), the id and name the delta carried, and its arguments fragment,
which is exactly what
[`TurnTextStream.tool_call_delta()`][juno_bind_trio.completion.TurnTextStream.tool_call_delta]
takes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, NoReturn, Protocol, TypeAlias, TypedDict, cast, final

import attrs

from juno_bind_trio._calls import ToolCall
from juno_bind_trio._errors import ToolCallAssemblyError

__all__ = [
    "AssembledToolCall",
    "DispatchableToolCall",
    "ToolCallAccumulator",
    "ToolCallDelta",
    "ToolCallDeltaObject",
    "ToolCallFunction",
]

_INCONSISTENT: Final = "inconsistent_tool_call_delta"
_INCOMPLETE: Final = "incomplete_tool_call"


class ToolCallFunction(TypedDict):
    """The ``function`` member of a
    [`DispatchableToolCall`][juno_bind_trio.completion.DispatchableToolCall]."""

    name: str
    arguments: str


class DispatchableToolCall(TypedDict):
    """A finished tool call in the chat-completions message shape.

    ``{"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}``:
    what goes into the assistant message's ``tool_calls``, and what the loop
    dispatches. ``arguments`` is the raw JSON text as the model sent it; parse
    it with [`parse_tool_call_arguments()`][juno_bind_trio.completion.parse_tool_call_arguments].
    """

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class _FunctionDeltaObject(Protocol):
    @property
    def name(self) -> str | None: ...

    @property
    def arguments(self) -> str | None: ...


class ToolCallDeltaObject(Protocol):
    """The attribute shape of a delta, as the openai SDK's ``ChoiceDeltaToolCall`` has it."""

    @property
    def index(self) -> int: ...

    @property
    def id(self) -> str | None: ...

    @property
    def type(self) -> str | None: ...

    @property
    def function(self) -> _FunctionDeltaObject | None: ...


ToolCallDelta: TypeAlias = Mapping[str, Any] | ToolCallDeltaObject
"""One streamed piece of a tool call.

Either the wire dict (``{"index": 0, "id": "call_1", "type": "function",
"function": {"name": "search", "arguments": "{\\"q"}}``, every key but
``index`` optional) or an object with those attributes, such as the openai
SDK's ``ChoiceDeltaToolCall``.
"""


@attrs.frozen
class AssembledToolCall:
    """A tool call as far as it has been assembled.

    ``id`` and ``name`` are ``None`` until a delta carried them; ``arguments``
    is every fragment so far, concatenated (so a prefix of the final text).
    """

    index: int
    id: str | None
    name: str | None
    arguments: str

    @property
    def complete(self) -> bool:
        """Whether the call has both an id and a name (its arguments may still be growing)."""
        return self.id is not None and self.name is not None


@final
class _Slot:
    """The mutable state of one call. Fragments are joined lazily, once per read."""

    __slots__ = ("extra", "id", "index", "name", "parts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id: str | None = None
        self.name: str | None = None
        self.parts: list[str] = []
        # A provider's own fields on the call, as they arrived; None while there are none.
        self.extra: dict[str, Any] | None = None

    def fold(self, fields: Iterable[tuple[str, Any]]) -> None:
        """Fold in fields the call carries beyond index, id, type and function."""
        extra = self.extra
        if extra is None:
            extra = self.extra = {}
        _fold(extra, ((k, v) for k, v in fields if k not in _DELTA_KEYS))

    def arguments(self) -> str:
        parts = self.parts
        if len(parts) > 1:
            # Cache the join: a host that renders mid-stream reads after every
            # delta, and re-joining every fragment each time would be quadratic.
            joined = "".join(parts)
            parts.clear()
            parts.append(joined)
            return joined
        return parts[0] if parts else ""


def _fold(held: dict[str, Any], fields: Iterable[tuple[str, Any]]) -> None:
    """Fold one delta's fields of a provider's own into *held*, as streaming sends them.

    A string continues the one held (appended, as text and arguments are); a
    list continues the one held (extended); any other value replaces what was
    held (a repeat of the same object changes nothing). ``None`` is "not on
    this delta".
    """
    for key, value in fields:
        if value is None:
            continue
        before = held.get(key)
        if isinstance(before, str) and isinstance(value, str):
            held[key] = before + value
        elif isinstance(before, list) and isinstance(value, list):
            held[key] = [*before, *value]
        else:
            held[key] = value


_MISSING: Final[Any] = object()

# The keys of a delta that are the call's own; any other is a provider's field.
_DELTA_KEYS: Final = frozenset({"index", "id", "type", "function"})

# Whether a delta class is a Mapping, decided once per class (a handful exist).
_IS_MAPPING: Final[dict[type, bool]] = {}


def _index(value: object) -> int:
    if isinstance(value, bool):
        raise TypeError
    index = operator.index(value)  # type: ignore[arg-type]
    if index < 0:
        raise ValueError
    return index


def _check_on_delta(_self: object, _attr: object, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"ToolCallAccumulator: on_delta must be a callable or None, got {value!r}")


@final
@attrs.define(eq=False, repr=False)
class ToolCallAccumulator:
    """Assembles streamed tool-call deltas into complete calls.

    Feed it each delta ([`add()`][juno_bind_trio.completion.ToolCallAccumulator.add]) or each
    chunk's list of deltas ([`extend()`][juno_bind_trio.completion.ToolCallAccumulator.extend],
    which accepts ``None``: ``acc.extend(delta.tool_calls)``). Synchronous, no checkpoints, not
    thread-safe; one accumulator per attempt.

    *on_delta*: ``(index, tool_call_id, name, arguments_fragment) -> None``,
    called after each delta is folded in (``None`` / ``""`` for what the delta
    did not carry), for a live view of the arguments; whatever it raises
    propagates out of ``add``.
    """

    _on_delta: Callable[[int, str | None, str | None, str], None] | None = attrs.field(
        default=None, alias="on_delta", kw_only=True, validator=_check_on_delta
    )
    _slots: dict[int, _Slot] = attrs.field(factory=dict, init=False)
    _last: _Slot | None = attrs.field(default=None, init=False)
    _deltas: int = attrs.field(default=0, init=False)

    def __repr__(self) -> str:
        return f"<ToolCallAccumulator calls={len(self._slots)} deltas={self._deltas}>"

    def __len__(self) -> int:
        """How many calls have been seen (complete or not)."""
        return len(self._slots)

    @property
    def delta_count(self) -> int:
        """How many deltas have been added."""
        return self._deltas

    def add(self, delta: ToolCallDelta) -> None:
        """Fold one delta in.

        Raises [`ToolCallAssemblyError`][juno_bind_trio.ToolCallAssemblyError] for a delta that
        contradicts what its index already holds, and ``TypeError`` for a value
        that is not a delta at all.
        """
        # The ABC check is most of the cost of a delta, so it runs once per class.
        cls = delta.__class__
        is_mapping = True if cls is dict else _IS_MAPPING.get(cls)
        if is_mapping is None:
            is_mapping = _IS_MAPPING[cls] = issubclass(cls, Mapping)
        if is_mapping:
            get = cast("Mapping[str, Any]", delta).get
            index = get("index")
            id_ = get("id")
            type_ = get("type")
            function = get("function")
            if function is None:
                name = arguments = None
            elif function.__class__ is dict or isinstance(function, Mapping):
                name = function.get("name")
                arguments = function.get("arguments")
            else:
                name = getattr(function, "name", None)
                arguments = getattr(function, "arguments", None)
            # An arguments fragment ({"index", "function"}) carries nothing else;
            # any other delta pays one C-speed subset test for a provider's fields.
            fields = cast("Mapping[str, Any]", delta)
            extra: Mapping[str, Any] | None = (
                None
                if (len(fields) == 2 and function is not None and index is not None)
                or _DELTA_KEYS.issuperset(fields)
                else fields
            )
        else:
            index = getattr(delta, "index", _MISSING)
            # A str has an `index` method; no other plausible mistake has the attribute.
            if index is _MISSING or isinstance(cast(object, delta), (str, bytes)):
                raise TypeError(
                    "ToolCallAccumulator.add: expected a tool-call delta (a mapping or an "
                    f"object with `index` and `function`), got {delta!r}"
                )
            id_ = getattr(delta, "id", None)
            type_ = getattr(delta, "type", None)
            function = getattr(delta, "function", None)
            if function is None:
                name = arguments = None
            else:
                name = getattr(function, "name", None)
                arguments = getattr(function, "arguments", None)
            # The openai SDK keeps the fields it does not model in `model_extra`.
            extra = getattr(delta, "model_extra", None) or None
        self._deltas += 1

        # -- which call: by index, or by position for a server that sends none.
        if index is None:
            slot = self._unindexed_slot(id_)
        else:
            found = self._slots.get(index) if type(index) is int else None
            if found is not None:
                slot = found
            else:
                try:
                    checked = _index(index)
                except (TypeError, ValueError):
                    raise ToolCallAssemblyError(
                        _INCONSISTENT,
                        f"tool-call delta index must be a non-negative integer, got {index!r}",
                    ) from None
                existing = self._slots.get(checked)
                if existing is None:
                    existing = self._slots[checked] = _Slot(checked)
                slot = existing
        self._last = slot

        # -- the fields that arrive once. Empty strings mean "not on this delta".
        if id_:
            if slot.id is None:
                if not isinstance(id_, str):
                    self._bad(slot, "id", id_)
                slot.id = id_
            elif id_ != slot.id:
                raise ToolCallAssemblyError(
                    _INCONSISTENT,
                    f"tool call {slot.index} changed id from {slot.id!r} to {id_!r}: "
                    "two calls were streamed under one index",
                    slot.index,
                )
        if type_ and type_ != "function":
            raise ToolCallAssemblyError(
                _INCONSISTENT,
                f"tool call {slot.index} has type {type_!r}; only 'function' calls are assembled",
                slot.index,
            )
        if name:
            if slot.name is None:
                if not isinstance(name, str):
                    self._bad(slot, "function.name", name)
                slot.name = name
            elif name != slot.name:
                raise ToolCallAssemblyError(
                    _INCONSISTENT,
                    f"tool call {slot.index} changed name from {slot.name!r} to {name!r}",
                    slot.index,
                )
        if arguments:
            if arguments.__class__ is not str and not isinstance(arguments, str):
                self._bad(slot, "function.arguments", arguments)
            slot.parts.append(arguments)
        if extra is not None:
            if not isinstance(extra, Mapping):
                self._bad(slot, "a provider's fields", extra)
            if not all(isinstance(key, str) for key in extra):
                raise ToolCallAssemblyError(
                    _INCONSISTENT,
                    f"tool call {slot.index}: a field's name must be a string, got {extra!r}",
                    slot.index,
                )
            slot.fold(extra.items())
        on_delta = self._on_delta
        if on_delta is not None:
            on_delta(slot.index, id_ or None, name or None, arguments or "")

    def extend(self, deltas: Iterable[ToolCallDelta] | None) -> None:
        """Fold in every delta of one chunk, in order. ``None`` (no tool calls) is a no-op."""
        if deltas is None:
            return
        add = self.add
        for delta in deltas:
            add(delta)

    def assembled(self) -> list[AssembledToolCall]:
        """Every call seen so far, in index order, as far as it has been assembled.

        Readable at any point mid-stream; each call is a fresh immutable snapshot.
        """
        return [
            AssembledToolCall(
                index=slot.index, id=slot.id, name=slot.name, arguments=slot.arguments()
            )
            for _, slot in sorted(self._slots.items())
        ]

    def tool_calls(self) -> list[ToolCall]:
        """The finished calls, in index order, each built once as a
        [`ToolCall`][juno_bind_trio.run.ToolCall]: the value the loop, the pool, the
        receipts and the dispatcher all read.

        Call it when the stream has ended. Raises
        [`ToolCallAssemblyError`][juno_bind_trio.ToolCallAssemblyError] (``kind
        "incomplete_tool_call"``) if a call never received its id or its
        name: a call cannot be dispatched without its name, nor answered
        without its id. Arguments are kept exactly as streamed (``""``
        included; the rule of [`ToolCall.parsed`][juno_bind_trio.run.ToolCall.parsed]
        reads them), and a provider's own fields are in ``extra``.
        """
        out: list[ToolCall] = []
        for _, slot in sorted(self._slots.items()):
            if slot.id is None or slot.name is None:
                missing = "an id" if slot.id is None else "a name"
                raise ToolCallAssemblyError(
                    _INCOMPLETE,
                    f"tool call {slot.index} ended without {missing} "
                    f"(id={slot.id!r}, name={slot.name!r})",
                    slot.index,
                )
            out.append(ToolCall(slot.id, slot.name, slot.arguments(), extra=slot.extra or None))
        return out

    def calls(self) -> list[DispatchableToolCall]:
        """The finished calls, in index order, in the chat-completions message shape.

        The wire form of
        [`tool_calls()`][juno_bind_trio.completion.ToolCallAccumulator.tool_calls] (a
        provider's own fields included, after ``function``), with the same
        refusal of a call that lacks its id or name; see
        [`tool_call_arguments_absent()`][juno_bind_trio.completion.tool_call_arguments_absent]
        for arguments that are ``""``.
        """
        return [cast("DispatchableToolCall", call.to_wire()) for call in self.tool_calls()]

    # -- internals ---------------------------------------------------------------

    def _unindexed_slot(self, id_: object) -> _Slot:
        last = self._last
        if last is not None and (not id_ or last.id is None or id_ == last.id):
            return last
        index = max(self._slots) + 1 if self._slots else 0
        slot = self._slots[index] = _Slot(index)
        return slot

    @staticmethod
    def _bad(slot: _Slot, field: str, value: object) -> NoReturn:
        raise ToolCallAssemblyError(
            _INCONSISTENT,
            f"tool call {slot.index}: {field} must be a string, got {value!r}",
            slot.index,
        )
