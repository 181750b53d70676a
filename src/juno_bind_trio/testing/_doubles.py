"""In-process models for an agent's unit tests: no server, no key, no network.

[`TestModel`][juno_bind_trio.testing.TestModel] calls every tool it is
offered once, with arguments made from each tool's JSON schema, then answers;
[`FunctionModel`][juno_bind_trio.testing.FunctionModel] hands each turn to a
function of yours. Both are model functions, so they go wherever an
``async (ModelTurn) -> ModelTurnResult`` goes (``Agent(TestModel())``), and
both stream their text through the turn's text stream, so a reader of
``open_run`` sees ``TextEvent``\\s as it would from a provider.
[`block_model_requests`][juno_bind_trio.testing.block_model_requests] makes
every request through a real provider client an error, so a test suite
cannot reach a paid endpoint by mistake.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from typing import Any, Final, TypeAlias, final

import attrs

from juno_bind_trio import _blocking
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

__all__ = [
    "FunctionModel",
    "FunctionModelFn",
    "TestModel",
    "block_model_requests",
    "value_from_schema",
]

# --- a value for a JSON schema ---------------------------------------------------------

_FORMATS: Final[Mapping[str, str]] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uri-reference": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}

_MAX_DEPTH: Final = 32
_MAX_SIZE: Final = 10_000  # items of an array, characters of a string
_GENERATED_LIMIT: Final = 256  # tool schemas whose generated arguments a TestModel keeps


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    seen: set[str] = set()
    while "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
            raise ValueError(f"value_from_schema: cannot follow $ref {ref!r}")
        seen.add(ref)
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise ValueError(f"value_from_schema: $ref {ref!r} names nothing in the schema")
            target = target[part]
        if not isinstance(target, Mapping):
            raise TypeError(f"value_from_schema: $ref {ref!r} is not a schema")
        # Keywords beside a $ref (a description, a default) apply too.
        rest = {key: value for key, value in schema.items() if key != "$ref"}
        schema = {**target, **rest}
    return schema


def _bound(schema: Mapping[str, Any], key: str) -> float | None:
    value = schema.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if not math.isfinite(value) or abs(value) > 2**53:
        raise ValueError(f"value_from_schema: {key} must be a finite number, got {value!r}")
    return value


def _size(schema: Mapping[str, Any], key: str) -> int | None:
    value = schema.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if not 0 <= value <= _MAX_SIZE:
        raise ValueError(f"value_from_schema: {key} must be 0 to {_MAX_SIZE}, got {value!r}")
    return value


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    # Zero where the bounds admit it, else the nearest value they do.
    low, high = _bound(schema, "minimum"), _bound(schema, "maximum")
    above, below = _bound(schema, "exclusiveMinimum"), _bound(schema, "exclusiveMaximum")
    value: float = 0
    if low is not None and value < low:
        value = low
    if high is not None and value > high:
        value = high
    if above is not None and value <= above:
        ceiling = below if below is not None else high
        value = above + 1 if integer or ceiling is None else (above + ceiling) / 2
    if below is not None and value >= below:
        floor = above if above is not None else low
        value = below - 1 if integer or floor is None else (below + floor) / 2
    multiple = _bound(schema, "multipleOf")
    if multiple is not None and multiple > 0:
        value = -(-value // multiple) * multiple  # the first multiple at or above it
    if integer:
        whole = int(value)
        return whole if whole >= value else whole + 1
    return float(value)


def _string(schema: Mapping[str, Any]) -> str:
    text = _FORMATS.get(str(schema.get("format")), "a")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"value_from_schema: pattern {pattern!r} is not a regex: {exc}"
            ) from None
    if isinstance(pattern, str) and re.search(pattern, text) is None:
        # A pattern is a language of its own: try the few strings tests usually
        # constrain, then give up clearly rather than send something invalid.
        for candidate in ("a", "A", "0", "a0", "aaa", "abc", "ABC", "000", "a-a", "a_a", ""):
            if re.search(pattern, candidate) is not None:
                text = candidate
                break
        else:
            raise ValueError(
                f"value_from_schema: no value found for the pattern {pattern!r}; "
                "give TestModel(arguments=...) for this tool"
            )
    low = _size(schema, "minLength")
    if low is not None and len(text) < low:
        text = text + text[-1:] * (low - len(text)) if text else "a" * low
    high = _size(schema, "maxLength")
    if high is not None and len(text) > high:
        text = text[:high]
    return text


def _value(schema: object, root: Mapping[str, Any], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise ValueError("value_from_schema: the schema nests deeper than 32 levels")
    if schema is True or schema == {}:
        return "a"
    if not isinstance(schema, Mapping):
        raise TypeError(f"value_from_schema: a schema must be a dict or True, got {schema!r}")
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            # A real value over null where the union allows both.
            usable = [
                o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")
            ]
            return _value((usable or options)[0], root, depth + 1)
    every = schema.get("allOf")
    if isinstance(every, list) and every:
        merged: dict[str, Any] = {}
        for part in every:
            if isinstance(part, Mapping):
                merged.update(_resolve(part, root))
        rest = {key: value for key, value in schema.items() if key != "allOf"}
        return _value({**merged, **rest}, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if kinds else "null"
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        properties = schema.get("properties")
        value: dict[str, Any] = {}
        if isinstance(properties, Mapping):
            for name, field in properties.items():
                value[str(name)] = _value(field, root, depth + 1)
        return value
    if kind == "array":
        prefix = schema.get("prefixItems")
        items: list[Any] = []
        if isinstance(prefix, list):
            items = [_value(part, root, depth + 1) for part in prefix]
        low = _size(schema, "minItems")
        wanted = max(len(items), 1 if low is None else low)
        item_schema = schema.get("items", {})
        while len(items) < wanted and item_schema is not False:
            element = _value(item_schema, root, depth + 1)
            # uniqueItems: numbers count up, strings grow; other kinds stay one.
            if schema.get("uniqueItems") and element in items:
                if isinstance(element, bool):
                    element = not element
                if isinstance(element, int | float):
                    element = element + len(items)
                elif isinstance(element, str):
                    element = element + str(len(items))
                else:
                    break
            items.append(element)
        return items
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return _number(schema, integer=True)
    if kind == "number":
        return _number(schema, integer=False)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    raise ValueError(f"value_from_schema: unknown type {kind!r}")


def value_from_schema(schema: Mapping[str, Any]) -> Any:
    """A JSON value valid under *schema*, the same one every time.

    Follows local ``$ref``\\s, ``anyOf`` / ``oneOf`` (the first option that is
    not ``null``), ``allOf``, ``const``, ``enum`` (the first), ``default``,
    bounds on numbers, lengths and the common ``format``\\s of strings, and
    fills every property of an object, required or not. A ``pattern`` it
    cannot satisfy raises ``ValueError`` naming it.
    """
    if not isinstance(schema, Mapping):
        raise TypeError(f"value_from_schema: schema must be a dict, got {schema!r}")
    return _value(schema, schema, 0)


# --- streaming an answer ---------------------------------------------------------------


def _pieces(text: str) -> Iterator[str]:
    # Word by word, each with the space after it, so the reader sees a stream.
    start = 0
    for match in re.finditer(r"\S+\s*", text):
        if match.start() > start:
            yield text[start : match.start()]
        yield match.group()
        start = match.end()
    if start < len(text):
        yield text[start:]


def _stream(turn: ModelTurn, text: str) -> None:
    stream = turn.text_stream
    if stream is None:
        return
    stream.begin_attempt()
    for piece in _pieces(text):
        stream.observe(piece)


def _tokens_of(text: str) -> int:
    # A deterministic stand-in for a tokenizer: four characters a token, the
    # usual rule of thumb for English, rounded up.
    return (len(text) + 3) // 4


def _tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    # The stand-in over what a request sends: every message's text, and each
    # tool call's name and arguments, read from the strings the transcript holds
    # (nothing is encoded again, nothing split, on every turn).
    characters = 0
    for message in messages:
        content = message.get("content")
        if type(content) is str:
            characters += len(content) + 3  # each piece rounds up
        calls = message.get("tool_calls")
        if not calls:
            continue
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                name, arguments = function.get("name"), function.get("arguments")
                characters += (len(name) if type(name) is str else 0) + 3
                characters += (len(arguments) if type(arguments) is str else 0) + 3
    return characters // 4


# --- TestModel --------------------------------------------------------------------------


def _tool_name(definition: object) -> str:
    if type(definition) is dict:  # the common shape, without the abc check
        function = definition.get("function")
        if type(function) is dict:
            name = function.get("name")
            if type(name) is str:
                return name
    if isinstance(definition, Mapping):
        function = definition.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(definition.get("name"), str):
            return str(definition["name"])
    raise TypeError(f"TestModel: a tool definition without a name: {definition!r}")


def _tool_parameters(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    function = definition.get("function")
    source = function if type(function) is dict or isinstance(function, Mapping) else definition
    parameters = source.get("parameters")
    if type(parameters) is dict or isinstance(parameters, Mapping):
        return parameters
    return {"type": "object"}


def _schema_of(response_format: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping):
        return None
    schema = spec.get("schema")
    return schema if isinstance(schema, Mapping) else None


_SCALARS: Final = frozenset({str, int, float, bool})


@attrs.frozen
class _Generated:
    """Arguments ``TestModel`` made for one tool schema (``TestModel._generated_for``)."""

    schema: Mapping[str, Any]
    snapshot: Mapping[str, Any]
    encoded: str
    value: Any
    flat: bool  # a dict of scalars: a shallow copy is a copy


@final
class TestModel:
    """A model that exercises an agent's tools: every offered tool once, then an answer.

    The first model call of a run calls each tool the turn offers (all of them, or
    those named in *call_tools*), in one parallel batch, with arguments made
    from the tool's JSON schema by
    [`value_from_schema`][juno_bind_trio.testing.value_from_schema], or the
    ones you give in *arguments* (by tool name). The turn after the results
    answers: *text* when given, else a JSON object of each tool's answer by
    name; when the agent has an ``output_type``, a value of that type made
    from its schema (or *output*, when given). Text streams word by word.
    A run that continues from a checkpoint (``first_iteration`` above 1)
    answers at once.

    Deterministic: the same agent and prompt give the same calls, ids and
    answer on every run. It keeps no state between turns (it reads the
    transcript), so one ``TestModel`` serves concurrent runs.

    ``TestModel.calls`` lists the ``(tool_name, arguments)`` it asked for,
    in order, across its runs.
    """

    __test__ = False  # a model, not a pytest test class

    def __init__(
        self,
        *,
        call_tools: Sequence[str] | None = None,
        arguments: Mapping[str, Mapping[str, Any]] | None = None,
        text: str | None = None,
        output: Any = None,
    ) -> None:
        names: object = call_tools  # checked at run time, whatever the type says
        if names is not None and (
            isinstance(names, str)
            or not isinstance(names, Sequence)
            or not all(isinstance(name, str) for name in names)
        ):
            raise TypeError(
                f"TestModel: call_tools must be a list of tool names or None, got {names!r}"
            )
        given: object = arguments
        if given is not None and (
            not isinstance(given, Mapping)
            or not all(isinstance(v, Mapping) for v in given.values())
        ):
            raise TypeError(
                "TestModel: arguments must map a tool name to its arguments (a dict), "
                f"got {given!r}"
            )
        answer: object = text
        if answer is not None and not isinstance(answer, str):
            raise TypeError(f"TestModel: text must be a str or None, got {answer!r}")
        self._call_tools = None if call_tools is None else tuple(call_tools)
        self._arguments = {k: dict(v) for k, v in (arguments or {}).items()}
        self._text = text
        self._output = output
        self._response_format: Mapping[str, Any] | None = None
        self._output_tool: tuple[str, Mapping[str, Any]] | None = None
        self.calls: list[tuple[str, dict[str, Any]]] = []
        # Generated arguments by tool schema (see _generated_for), shared with the
        # bound copies the agent makes for its output type.
        self._generated: dict[int, _Generated] = {}

    def __repr__(self) -> str:
        return f"TestModel(call_tools={self._call_tools!r})"

    def with_output_format(self, response_format: Mapping[str, Any] | None) -> TestModel:
        """This model answering in *response_format*: the agent calls it for its ``output_type``."""
        bound = TestModel(
            call_tools=self._call_tools,
            arguments=self._arguments,
            text=self._text,
            output=self._output,
        )
        bound._response_format = response_format
        bound._output_tool = self._output_tool
        bound.calls = self.calls
        bound._generated = self._generated
        return bound

    def with_output_tool(self, name: str, parameters: Mapping[str, Any]) -> TestModel:
        """This model answering by calling the final-answer tool *name* (``ToolOutput``).

        The agent calls it for an ``output_type`` in tool mode: the first turn
        calls the other tools, and the answer is a call to *name* with the
        ``output`` given, or arguments generated from *parameters*.
        """
        bound = self.with_output_format(self._response_format)
        bound._output_tool = (name, parameters)
        return bound

    def _generated_for(self, parameters: Mapping[str, Any]) -> tuple[str, Any]:
        # value_from_schema(parameters) and its JSON text, made once per schema: an
        # agent hands the same definitions to every turn of every run. The entry
        # holds the schema (so its id cannot be reused) and a copy of it, so a
        # schema edited in place is generated again rather than read stale. The
        # value returned is a fresh one each time (TestModel.calls may be edited).
        key = id(parameters)
        entry = self._generated.get(key)
        if entry is None or entry.schema is not parameters or entry.snapshot != parameters:
            value = value_from_schema(parameters)
            flat = isinstance(value, dict) and all(
                v is None or type(v) in _SCALARS for v in value.values()
            )
            if len(self._generated) >= _GENERATED_LIMIT:  # definitions made afresh each step
                self._generated.clear()
            entry = _Generated(
                parameters, copy.deepcopy(parameters), json.dumps(value), value, flat
            )
            self._generated[key] = entry
        fresh = dict(entry.value) if entry.flat else json.loads(entry.encoded)
        return entry.encoded, fresh

    def _answer(self, turn: ModelTurn) -> str:
        schema = None if self._response_format is None else _schema_of(self._response_format)
        if self._response_format is not None:
            value = (
                self._output
                if self._output is not None
                else (value_from_schema(schema) if schema is not None else {})
            )
            return json.dumps(value)
        if self._text is not None:
            return self._text
        messages = turn.messages
        start = len(messages)
        while start and messages[start - 1].get("role") == "tool":
            start -= 1
        answered = messages[start:]  # the results this answer reports
        # Each result's tool by its call id, from the latest call of that id:
        # looked for backwards, so only the last assistant message is read.
        wanted = {str(m.get("tool_call_id")) for m in answered}
        names: dict[str, str] = {}
        index = start
        while index and len(names) < len(wanted):
            index -= 1
            for call in messages[index].get("tool_calls") or ():
                key = str(call.get("id"))
                if key in wanted and key not in names:
                    names[key] = str(call.get("function", {}).get("name"))
        answers: dict[str, Any] = {}
        for message in reversed(answered):
            answers[names.get(str(message.get("tool_call_id")), "?")] = message.get("content")
        return json.dumps(dict(reversed(list(answers.items()))) or "done")

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        messages = turn.messages
        input_tokens = _tokens(messages)
        # The first model call of a run calls the tools; every later one (and a
        # re-ask inside a turn) answers.
        if turn.iteration == 1 and (not messages or messages[-1].get("role") != "tool"):
            answer_tool = None if self._output_tool is None else self._output_tool[0]
            chosen = self._call_tools
            wanted: list[tuple[str, Mapping[str, Any]]] = []
            for definition in turn.tools:
                if not isinstance(definition, Mapping):
                    continue
                name = _tool_name(definition)
                if name != answer_tool and (chosen is None or name in chosen):
                    wanted.append((name, definition))
            if wanted:
                calls = []
                for index, (name, definition) in enumerate(wanted):
                    given = self._arguments.get(name)
                    if given is not None:
                        arguments = dict(given)
                        encoded = json.dumps(arguments)
                    else:
                        encoded, arguments = self._generated_for(_tool_parameters(definition))
                    self.calls.append((name, arguments))
                    calls.append(
                        {
                            "id": f"test_{turn.iteration}_{index}",
                            "type": "function",
                            "function": {"name": name, "arguments": encoded},
                        }
                    )
                return ModelTurnResult(
                    tool_calls=calls, input_tokens=input_tokens, output_tokens=len(calls)
                )
        if self._output_tool is not None:
            name, parameters = self._output_tool
            arguments = self._output if self._output is not None else value_from_schema(parameters)
            encoded = json.dumps(arguments)
            self.calls.append((name, arguments))
            call = {
                "id": f"test_{turn.iteration}_answer",
                "type": "function",
                "function": {"name": name, "arguments": encoded},
            }
            return ModelTurnResult(
                tool_calls=[call], input_tokens=input_tokens, output_tokens=_tokens_of(encoded)
            )
        text = self._answer(turn)
        _stream(turn, text)
        return ModelTurnResult(
            content=text, input_tokens=input_tokens, output_tokens=_tokens_of(text)
        )


# --- FunctionModel ----------------------------------------------------------------------

FunctionModelFn: TypeAlias = Callable[
    [ModelTurn],
    "ModelTurnResult | Awaitable[ModelTurnResult] | AsyncIterator[str | ModelTurnResult]",
]
"""What [`FunctionModel`][juno_bind_trio.testing.FunctionModel] takes: a function of the turn."""


@final
class FunctionModel:
    """A model that is a function of yours: ``fn(turn)`` decides each turn.

    *fn* takes the [`ModelTurn`][juno_bind_trio.loop.ModelTurn] a host's model
    function takes (its ``messages``, ``tools``, ``iteration``) and returns a
    [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult], either directly
    (a plain or an ``async`` function) or by streaming: an async generator
    that yields text pieces (``str``), each reaching the reader as it is
    yielded, and optionally a ``ModelTurnResult`` last (for tool calls or
    usage; its ``content``, when ``None``, is the text yielded). A plain
    function runs on the event loop: keep it quick.
    """

    def __init__(self, fn: FunctionModelFn) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel: fn must be a function of the turn, got {fn!r}")
        self._fn = fn
        self.__name__: str = getattr(fn, "__name__", type(fn).__name__)

    def __repr__(self) -> str:
        return f"FunctionModel({self.__name__})"

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        produced: object = self._fn(turn)
        if inspect.isasyncgen(produced):
            return await self._streamed(turn, produced)
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, ModelTurnResult):
            raise TypeError(
                f"FunctionModel({self.__name__}): fn must return a ModelTurnResult, got "
                f"{produced!r}"
            )
        if produced.content and turn.text_stream is not None:
            _stream(turn, produced.content)
        return produced

    async def _streamed(self, turn: ModelTurn, pieces: Any) -> ModelTurnResult:
        stream = turn.text_stream
        if stream is not None:
            stream.begin_attempt()
        text: list[str] = []
        final: ModelTurnResult | None = None
        async with aclosing(pieces):
            async for piece in pieces:
                if final is not None:
                    raise TypeError(
                        f"FunctionModel({self.__name__}): a ModelTurnResult must be the last "
                        "thing yielded"
                    )
                if isinstance(piece, ModelTurnResult):
                    final = piece
                elif isinstance(piece, str):
                    text.append(piece)
                    if stream is not None:
                        stream.observe(piece)
                else:
                    raise TypeError(
                        f"FunctionModel({self.__name__}): yield str pieces of text or a "
                        f"ModelTurnResult, got {piece!r}"
                    )
        joined = "".join(text)
        if final is None:
            return ModelTurnResult(content=joined or None)
        if final.content is None and joined:
            return attrs.evolve(final, content=joined)
        return final


# --- no real requests -------------------------------------------------------------------


@contextmanager
def block_model_requests() -> Iterator[None]:
    """Inside this block, any request through a real provider client raises ``UsageError``.

    Process-wide (every task and thread), and nestable. In-process models
    (``TestModel``, ``FunctionModel``, your own model functions) are not
    affected. Also a pytest fixture of the same name (this package registers
    a pytest plugin): ask for ``block_model_requests`` in a test, or use it
    in ``conftest.py`` with ``autouse``.
    """
    _blocking.block()
    try:
        yield
    finally:
        _blocking.unblock()
