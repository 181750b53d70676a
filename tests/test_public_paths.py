"""What ``help()``, tracebacks and pickles show: the public path, real types, a docstring."""

from __future__ import annotations

import importlib
import inspect
import pickle
import traceback
from typing import Any

import attrs
import pytest

import juno_bind_trio
from juno_bind_trio._public import publish
from juno_bind_trio.loop import ToolLoop
from test_public_api import SUBPACKAGES


def public_objects() -> list[tuple[str, str, Any]]:
    found = []
    for module_name in SUBPACKAGES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                found.append((module_name, name, obj))
    return found


PUBLIC = public_objects()


def param_id(value: object) -> str:
    """A test id that is the same in every process (a function's repr holds its address,
    and xdist's workers must collect the same ids)."""
    if inspect.isfunction(value):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


@pytest.mark.parametrize(("module_name", "name", "obj"), PUBLIC, ids=param_id)
def test_module_is_a_public_home_that_exports_the_name(
    module_name: str, name: str, obj: Any
) -> None:
    home = obj.__module__
    assert not any(part.startswith("_") for part in home.split(".")), (name, home)
    assert name in importlib.import_module(home).__all__
    assert getattr(importlib.import_module(home), obj.__qualname__) is obj


def test_exceptions_live_at_the_top_level_wherever_they_are_re_exported() -> None:
    from juno_bind_trio.completion import StreamStallError
    from juno_bind_trio.routing import AllRoutesFailedError

    assert StreamStallError.__module__ == "juno_bind_trio"
    assert AllRoutesFailedError.__module__ == "juno_bind_trio"
    assert ToolLoop.__module__ == "juno_bind_trio.loop"


@pytest.mark.parametrize("defined_in", ["juno_bind_trio._errors", "juno_bind_trio._errors_base"])
def test_a_subpackage_publishing_an_exception_first_leaves_it_to_the_top_level(
    defined_in: str,
) -> None:
    probe = type("Probe", (Exception,), {"__module__": defined_in})
    publish("juno_bind_trio.completion", {"Probe": probe}, ["Probe"])
    assert probe.__module__ == defined_in
    publish("juno_bind_trio", {"Probe": probe}, ["Probe"])
    assert probe.__module__ == "juno_bind_trio"


def test_traceback_and_pickle_name_the_public_path() -> None:
    try:
        raise juno_bind_trio.UsageError("the loop was already run")
    except juno_bind_trio.UsageError as exc:
        text = "".join(traceback.format_exception(exc))
    assert "juno_bind_trio.UsageError: the loop was already run" in text
    assert "_errors" not in text.splitlines()[-1]
    again = pickle.loads(pickle.dumps(juno_bind_trio.UsageError("x")))
    assert type(again) is juno_bind_trio.UsageError


@pytest.mark.parametrize(("module_name", "name", "obj"), PUBLIC, ids=param_id)
def test_every_public_class_and_function_has_its_own_docstring(
    module_name: str, name: str, obj: Any
) -> None:
    assert obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__, name


ATTRS_CLASSES = [(n, o) for _, n, o in PUBLIC if inspect.isclass(o) and attrs.has(o)]


@pytest.mark.parametrize(("name", "cls"), ATTRS_CLASSES, ids=param_id)
def test_constructor_parameters_carry_real_types(name: str, cls: type) -> None:
    """A converter that takes ``object`` would make help() and type checkers say ``object``."""
    annotations = cls.__init__.__annotations__  # type: ignore[misc]
    loose = [
        field.alias
        for field in attrs.fields(cls)
        if field.init
        and annotations.get(field.alias) in ("object", object)
        and field.type not in ("object", object)
    ]
    assert loose == [], f"{name}.__init__ takes object for {loose}"


def test_help_of_tool_loop_shows_int_for_max_iterations() -> None:
    signature = str(inspect.signature(ToolLoop)).replace("'", "")
    assert "max_iterations: int," in signature
    assert "per_tool_limit: int =" in signature
    assert "run_id: str =" in signature


def test_a_type_checker_refuses_a_string_count() -> None:
    """mypy runs over the tests with warn_unused_ignores: if ``max_iterations``
    took ``object`` again, the ignore below would be unused and mypy would fail."""

    async def call_model(turn: object) -> object:
        raise NotImplementedError

    with pytest.raises(TypeError, match="max_iterations must be a positive integer"):
        ToolLoop(
            state=attrs.make_class("State", {"messages": attrs.field(factory=list)})(),
            max_iterations="5",  # type: ignore[arg-type]
            call_model=call_model,  # type: ignore[arg-type]
            run_tool_call=call_model,  # type: ignore[arg-type]
        )


def test_turn_text_view_repr_shows_its_turn_and_visible_text() -> None:
    from juno_bind_trio.completion import ResetEvent, TextEvent, TurnTextView

    view = TurnTextView("run:1")
    view.apply(TextEvent("run:1", 0, 0, "Hello, "))
    view.apply(TextEvent("run:1", 0, 1, "world"))
    assert (
        repr(view)
        == "TurnTextView(turn_id='run:1', text='Hello, world', epoch=0, last_seq=1, held=0)"
    )
    view.apply(TextEvent("run:1", 0, 3, "held back"))
    assert repr(view).endswith("last_seq=1, held=1)")
    view.apply(ResetEvent("run:1", 1, 2, "attempt_failed"))
    view.finalize()
    assert repr(view).startswith("TurnTextView(turn_id='run:1', text='', epoch=1")
    assert repr(view).endswith("final=True)")
    long = TurnTextView("t")
    long.apply(TextEvent("t", 0, 0, "x" * 500))
    assert len(repr(long)) < 140
    assert "…" in repr(long)


def test_circuit_breaker_repr_shows_each_endpoint_state() -> None:
    from juno_bind_trio.routing import CircuitBreaker

    now = [100.0]
    breaker = CircuitBreaker(failure_threshold=2, reset_timeout=30.0, clock=lambda: now[0])
    first = breaker.admit("primary")
    assert first is not None
    breaker.record_failure(first)
    ok = breaker.admit("fallback")
    assert ok is not None
    breaker.record_success(ok)
    assert repr(breaker) == (
        "CircuitBreaker(failure_threshold=2, reset_timeout=30.0, half_open_max_probes=1, "
        "endpoints={'primary': 'closed, 1 consecutive failure(s)', 'fallback': 'closed'})"
    )
    second = breaker.admit("primary")
    assert second is not None
    breaker.record_failure(second)
    assert "'primary': 'open until 130 (clock seconds)'" in repr(breaker)
    now[0] = 200.0
    # repr reads no clock and changes nothing: the endpoint is still recorded open.
    assert "'primary': 'open until 130" in repr(breaker)
    assert breaker.state("primary") == "half_open"
