"""The machinery behind the public-surface fuzz: entries, argument strategies and the contract.

An [Entry][] names one public callable, a hypothesis strategy for the
arguments to call it with, the package errors it may raise on purpose, and
optionally a check of what it returns. ``test_fuzz_public.py`` calls every
entry with many drawn arguments and holds each call to one contract:

* it returns, and the ``check`` (if any) accepts what it returned; or
* it raises one of the entry's ``raises`` (the package's own errors it
  documents); or
* it raises ``TypeError`` / ``ValueError`` whose message names the callable
  (``"heal_transcript: ..."``, ``"StreamWatchdog: ..."``) and is not
  Python's own "unhashable type" complaint; and the kind follows the
  package's one rule ([check_error_kind][]): ``TypeError`` for an argument of
  the wrong type, ``ValueError`` for a wrong value of the right type.

Anything else — ``OverflowError``, ``RecursionError``, ``AttributeError``,
``KeyError``, ``IndexError``, a bare ``TypeError`` from deep inside — is a
crash from inside, and fails the test with the arguments that caused it.

[auto][] builds an argument strategy from a signature: each parameter gets
either a value of its annotated type or junk ([JUNK][]: ``None``, huge and
non-finite numbers, bytes, nested containers, unhashable values, objects).
An entry that only says ``Entry(target)`` is fuzzed that way. Give an entry
its own ``args`` when the interesting inputs are structured (a transcript, a
schema, a JSON document) so the fuzz reaches past the first type check.
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import attrs
import hypothesis.strategies as st
import trio
import trio.testing

from juno_bind_trio import JunoBindError

__all__ = [
    "DEEP",
    "FORBIDDEN",
    "JUNK",
    "Call",
    "Entry",
    "auto",
    "call",
    "deep",
    "invoke",
    "register_example",
]


@attrs.frozen
class Call:
    """Positional and keyword arguments for one call."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)

    def __repr__(self) -> str:
        parts = [_short(a) for a in self.args]
        parts += [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis would pretty-print each field, recursing into values
        # thousands of levels deep; the short repr says enough.
        printer.text(repr(self))


def _short(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} with a failing repr>"
    return text if len(text) <= 300 else text[:300] + f"... ({len(text)} characters)"


def call(*args: Any, **kwargs: Any) -> Call:
    return Call(args, kwargs)


Check = Callable[[Call, Any], None]
"""Receives the call and what it returned; asserts the callable's own contract."""


@attrs.frozen
class Entry:
    """One public callable under fuzz.

    ``target``: the function or class. ``args``: a strategy for [Call][]s
    (default: [auto][] from the signature). ``raises``: the package errors it
    may raise on purpose. ``check``: asserts what a successful call returned.
    ``name``: what an error message must mention (default ``target.__name__``);
    ``also_named``: other names a message may mention instead, for a thin
    wrapper whose checks are those of what it wraps. ``label``: the test id,
    when one target has several entries. ``xfail``: a known defect not yet
    fixed, in words (the test then must fail; remove it with the fix).
    """

    target: Callable[..., Any]
    args: st.SearchStrategy[Call] | None = None
    raises: tuple[type[BaseException], ...] = ()
    check: Check | None = None
    check_error: Callable[[Call, BaseException], None] | None = None
    name: str | None = None
    also_named: tuple[str, ...] = ()
    label: str | None = None
    xfail: str | None = None

    @property
    def shown_name(self) -> str:
        return self.name or self.target.__name__

    @property
    def test_id(self) -> str:
        return self.label or f"{self.target.__module__.split('._')[0]}.{self.target.__qualname__}"

    def strategy(self) -> st.SearchStrategy[Call]:
        return self.args if self.args is not None else auto(self.target)


FORBIDDEN: Final = (OverflowError, RecursionError, AttributeError, KeyError, IndexError)
"""Crashes from inside: never an answer to bad input."""


# --- junk ------------------------------------------------------------------------

HUGE: Final = (10**400, -(10**400), 2**53 + 1, 2**64, 10**30)
ODD_FLOATS: Final = (math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324)


class _Opaque:
    """An object of no useful type, with a working repr."""

    def __repr__(self) -> str:
        return "<opaque>"


_leaves: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(HUGE),
    st.floats(),
    st.sampled_from(ODD_FLOATS),
    st.text(max_size=12),
    st.sampled_from(["", "\ud800", "0", "-1", "1e400", "nan", "a" * 300]),
    st.binary(max_size=6),
    st.builds(_Opaque),
)


def deep(depth: int, *, kind: Literal["list", "dict"] = "list") -> Any:
    """A JSON-like value nested *depth* containers deep (built without recursion)."""
    value: Any = 0
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


JUNK: Final[st.SearchStrategy[Any]] = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 3)), inner, max_size=4),
        st.frozensets(st.integers(), max_size=3),
        st.sets(st.integers(), max_size=3),
    ),
    max_leaves=10,
)
"""Values of no particular type, including the ones that crash careless code.

Not nested thousands deep: every boundary check names the value it refuses,
and Python's own ``repr`` of such a value is a ``RecursionError``. Deep
documents ([DEEP][]) go to the callables whose input *is* a document
(JSON, a schema, a transcript), where depth is part of the contract."""

DEEP: Final[st.SearchStrategy[Any]] = st.builds(
    deep, st.sampled_from([100, 999, 1000, 3000]), kind=st.sampled_from(["list", "dict"])
)
"""JSON-like values nested far past any recursive reader's reach."""


# --- valid values from annotations -------------------------------------------------

_EXAMPLES: dict[Any, st.SearchStrategy[Any]] = {}


def register_example(kind: Any, strategy: st.SearchStrategy[Any]) -> None:
    """Teach [auto][] how to draw a valid *kind* (a package class, a type alias)."""
    _EXAMPLES[kind] = strategy


def _sync_noop(*args: object, **kwargs: object) -> None:
    return None


async def _async_noop(*args: object, **kwargs: object) -> None:
    await trio.lowlevel.checkpoint()


_CALLABLES: Final = st.sampled_from([_sync_noop, _async_noop])


def _or_junk(strategy: st.SearchStrategy[Any] | None) -> st.SearchStrategy[Any]:
    return JUNK if strategy is None else strategy


def _valid_for(hint: Any) -> st.SearchStrategy[Any] | None:
    """A strategy for values of *hint*, or ``None`` where only junk can stand in."""
    if hint in _EXAMPLES:
        return _EXAMPLES[hint]
    if typing.get_origin(hint) in _EXAMPLES:  # AttemptRecord[Any]: the generic's examples
        return _EXAMPLES[typing.get_origin(hint)]
    if hint is Any or hint is object:
        return None
    if hint is None or hint is type(None):
        return st.none()
    origin = typing.get_origin(hint)
    targs = typing.get_args(hint)
    if origin is Literal:
        return st.sampled_from(targs)
    if origin in (typing.Union, types.UnionType):
        parts = [s for s in (_valid_for(a) for a in targs) if s is not None]
        return st.one_of(parts) if parts else None
    if origin is typing.Annotated:
        return _valid_for(targs[0])
    if hint in (str, int, float, bool, bytes):
        simple: dict[Any, st.SearchStrategy[Any]] = {
            str: st.text(max_size=12),
            int: st.integers(-3, 100),
            float: st.floats(-10, 1000, allow_nan=False),
            bool: st.booleans(),
            bytes: st.binary(max_size=8),
        }
        return simple[hint]
    if origin in (list, abc.Sequence, abc.Iterable, abc.Collection, abc.MutableSequence):
        inner = _valid_for(targs[0]) if targs else None
        return st.lists(_or_junk(inner), max_size=3)
    if origin is tuple:
        if len(targs) == 2 and targs[1] is Ellipsis:
            inner = _valid_for(targs[0])
            return st.lists(_or_junk(inner), max_size=3).map(tuple)
        parts = [_or_junk(_valid_for(a)) for a in targs]
        return st.tuples(*parts)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        value = _valid_for(targs[1]) if len(targs) == 2 else None
        return st.dictionaries(st.text(max_size=6), _or_junk(value), max_size=3)
    if origin is abc.Callable or hint is abc.Callable:
        return _CALLABLES
    return None


@functools.cache
def _public_names() -> dict[str, Any]:
    names: dict[str, Any] = {}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("juno_bind_trio"):
            names.update({n: getattr(module, n) for n in getattr(module, "__all__", ())})
    return names


def _hints(target: Callable[..., Any]) -> dict[str, Any]:
    function: Any = vars(target).get("__init__", target) if isinstance(target, type) else target
    if isinstance(target, type) and function is target:
        function = getattr(target, "__init__")  # noqa: B009 - inherited, not on the class
    try:
        return typing.get_type_hints(function)
    except Exception:
        pass
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    # Names imported only for type checking resolve to the package's public ones.
    namespace = {**_public_names(), **(vars(module) if module is not None else {})}
    hints: dict[str, Any] = {}
    for name, text in getattr(function, "__annotations__", {}).items():
        try:
            hints[name] = eval(text, namespace) if isinstance(text, str) else text
        except Exception:
            continue
    return hints


def _parameter(hint: Any, *, junk: bool) -> st.SearchStrategy[Any]:
    valid = _valid_for(hint) if hint is not None else None
    if valid is None:
        return JUNK
    return st.one_of(valid, valid, JUNK) if junk else valid


def auto(
    target: Callable[..., Any], *, junk: bool = True, **fixed: st.SearchStrategy[Any]
) -> st.SearchStrategy[Call]:
    """[Call][]s for *target* drawn from its signature: typed values mixed with junk.

    A parameter with a default is sometimes left out. *fixed* gives a
    parameter its own strategy (``auto(f, clock=st.just(fake_clock))``).
    ``junk=False`` draws only values of the annotated types (a parameter
    with no usable annotation still gets junk). A callable without a
    signature (a builtin exception class) gets a few junk positionals.
    """
    # Deferred: built on first draw, after every registry module has registered
    # its examples, whatever order they were imported in.
    return st.deferred(lambda: _auto(target, junk, fixed))


def _auto(
    target: Callable[..., Any], junk: bool, fixed: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[Call]:
    try:
        signature = inspect.signature(target)
    except ValueError:
        return st.lists(JUNK, max_size=3).map(lambda args: Call(tuple(args)))
    hints = _hints(target)
    positional: list[tuple[st.SearchStrategy[Any], bool]] = []
    keywords: dict[str, tuple[st.SearchStrategy[Any], bool]] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name == "task_status":
            continue
        strategy = fixed[name] if name in fixed else _parameter(hints.get(name), junk=junk)
        optional = parameter.default is not parameter.empty
        if parameter.kind is parameter.KEYWORD_ONLY:
            keywords[name] = (strategy, optional)
        else:
            positional.append((strategy, optional))

    if not positional and not keywords:
        return st.just(Call())

    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        args: list[Any] = []
        for strategy, optional in positional:
            if optional and draw(st.booleans()):
                break  # a positional default left out leaves out every one after it
            args.append(draw(strategy))
        kwargs = {
            name: draw(strategy)
            for name, (strategy, optional) in keywords.items()
            if not (optional and draw(st.booleans()))
        }
        return Call(tuple(args), kwargs)

    return calls()


# --- calling ---------------------------------------------------------------------

_VIRTUAL_LIMIT: Final = 10_000.0


def invoke(target: Callable[..., Any], arguments: Call) -> Any:
    """Call *target*; an async function runs (and an async context manager is entered
    and left) on trio under an autojumping virtual clock, cut off after a long while;
    a context manager a function returns is entered and left."""
    if inspect.iscoroutinefunction(target):

        async def run_coroutine() -> Any:
            with trio.move_on_after(_VIRTUAL_LIMIT):
                return await target(*arguments.args, **arguments.kwargs)
            return None

        return trio.run(run_coroutine, clock=trio.testing.MockClock(autojump_threshold=0))
    result = target(*arguments.args, **arguments.kwargs)
    if not isinstance(target, type) and hasattr(result, "__aenter__"):

        async def enter() -> Any:
            with trio.move_on_after(_VIRTUAL_LIMIT):
                async with result as value:
                    return value
            return None

        return trio.run(enter, clock=trio.testing.MockClock(autojump_threshold=0))
    if not isinstance(target, type) and hasattr(result, "__enter__"):
        with result as value:
            return value
    return result


# --- one rule: TypeError for a wrong type, ValueError for a wrong value -------------


def _all_conform(values: abc.Iterable[Any], hint: Any) -> bool | None:
    verdicts = [conforms(v, hint) for v in values]
    if False in verdicts:
        return False
    return True if all(v is True for v in verdicts) else None


def conforms(value: Any, hint: Any) -> bool | None:
    """Whether *value* is of the annotated type *hint*: ``True``, ``False``, or ``None``
    where a runtime check cannot tell (a callable's signature, a protocol, a type var).

    A ``bool`` is not an ``int`` or a ``float`` here (the package refuses ``True`` as a
    count), and a ``str`` is not a sequence of anything but characters. A value of the
    right type that is out of range (``nan`` seconds, a negative count, a ``Literal``'s
    stranger of the right type) conforms: refusing it is a ``ValueError``'s job.
    """
    if hint is Any or hint is object:
        return None  # "anything": what the callable wants of it is in its docs, not its type
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    targs = typing.get_args(hint)
    if origin is typing.Annotated:
        return conforms(value, targs[0])
    if origin is Literal:
        kinds = {type(a) for a in targs}
        return type(value) in kinds or (value is None and type(None) in kinds)
    if origin in (typing.Union, types.UnionType):
        verdicts = [conforms(value, a) for a in targs]
        if True in verdicts:
            return True
        return False if all(v is False for v in verdicts) else None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, bytes):
        return isinstance(value, hint)
    if origin in (list, abc.Sequence, abc.MutableSequence, abc.Collection, abc.Iterable):
        container = {list: list, abc.MutableSequence: abc.MutableSequence}.get(
            origin, abc.Sequence if origin is abc.Sequence else abc.Iterable
        )
        if isinstance(value, (str, bytes)) or not isinstance(value, container):
            return False
        if isinstance(value, abc.Mapping):
            return None  # iterable over its keys, but never what a caller of a sequence meant
        if isinstance(value, abc.Iterator) or not targs:
            return None  # an iterator's items are not read here: that would change the call
        return _all_conform(value, targs[0])
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(targs) == 2 and targs[1] is Ellipsis:
            return _all_conform(value, targs[0])
        if targs == ((),):
            return len(value) == 0
        if len(targs) != len(value):
            return False
        verdicts = [conforms(v, h) for v, h in zip(value, targs, strict=True)]
        return False if False in verdicts else (True if all(verdicts) else None)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        if not isinstance(value, dict if origin is dict else abc.Mapping):
            return False
        if len(targs) != 2:
            return None
        # What a mapping holds is data, checked as data (a ValueError) across the
        # package: a wrong key or value makes the verdict unsure, never "wrong type".
        keys, values = _all_conform(value.keys(), targs[0]), _all_conform(value.values(), targs[1])
        return True if keys and values else None
    if origin is abc.Callable or hint is abc.Callable:
        return None if callable(value) else False
    if origin is type:
        return None if isinstance(value, type) else False
    if isinstance(hint, type) and not getattr(hint, "_is_protocol", False):
        return isinstance(value, hint)
    if (
        origin is not None
        and isinstance(origin, type)
        and not getattr(origin, "_is_protocol", False)
    ):
        return None if isinstance(value, origin) else False
    return None


def _verdicts(target: Callable[..., Any], arguments: Call) -> dict[str, bool | None] | None:
    """Each bound argument's [conforms][] verdict, or ``None`` where it cannot be bound."""
    try:
        signature = inspect.signature(target)
        bound = signature.bind(*arguments.args, **arguments.kwargs)
    except (TypeError, ValueError):
        return None
    hints = _hints(target)
    return {
        name: conforms(value, hints[name]) if name in hints else None
        for name, value in bound.arguments.items()
    }


def check_error_kind(entry: Entry, arguments: Call, exc: BaseException) -> None:
    """Hold a ``TypeError`` / ``ValueError`` to the package's one rule.

    ``TypeError`` when every argument is of its annotated type is wrong (the value was
    refused: that is a ``ValueError``); ``ValueError`` when the only fault is one
    argument's type is wrong too (that is a ``TypeError``).
    """
    verdicts = _verdicts(entry.target, arguments)
    if not verdicts:
        return
    wrong = [name for name, verdict in verdicts.items() if verdict is False]
    unsure = [name for name, verdict in verdicts.items() if verdict is None]
    if isinstance(exc, TypeError) and not wrong and not unsure:
        raise AssertionError(
            f"{entry.shown_name}{arguments!r} raised TypeError({str(exc)!r}) though every "
            "argument has its annotated type: refusing a value is a ValueError"
        ) from exc
    named = len(wrong) == 1 and re.search(rf"\b{re.escape(wrong[0])}\b", str(exc)) is not None
    if isinstance(exc, ValueError) and named and not unsure:
        raise AssertionError(
            f"{entry.shown_name}{arguments!r} raised ValueError({str(exc)!r}) though the only "
            f"fault is the type of {wrong[0]!r}: a wrong type is a TypeError"
        ) from exc


def judge(entry: Entry, arguments: Call) -> None:
    """Call the entry once and hold the outcome to the contract (see the module docstring)."""
    try:
        result = invoke(entry.target, arguments)
    except entry.raises as exc:
        if entry.check_error is not None:
            entry.check_error(arguments, exc)
        return
    except (TypeError, ValueError) as exc:
        message = str(exc)
        named = any(name in message for name in (entry.shown_name, *entry.also_named))
        if "unhashable type" in message or not named:
            raise AssertionError(
                f"{entry.shown_name}{arguments!r} raised {type(exc).__name__}({message!r}), "
                f"which does not name {entry.shown_name!r} (a crash from inside?)"
            ) from exc
        check_error_kind(entry, arguments, exc)
        return
    except JunoBindError as exc:
        raise AssertionError(
            f"{entry.shown_name}{arguments!r} raised {type(exc).__name__}, which its fuzz "
            "entry does not list in raises"
        ) from exc
    except Exception as exc:
        raise AssertionError(
            f"{entry.shown_name}{arguments!r} crashed from inside with {type(exc).__name__}: "
            f"{_short(str(exc))}"
        ) from exc
    if entry.check is not None:
        entry.check(arguments, result)
