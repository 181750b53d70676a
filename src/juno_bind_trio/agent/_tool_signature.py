"""What ``@tool`` reads from a function: its parameters as a pydantic model and a JSON schema.

Everything that can be wrong with a function as a tool is found here, named,
and refused with a ``TypeError`` that says what to change: a parameter
without a type, a type pydantic cannot express, ``*args``, a ``RunContext``
that is not first. None of those can be fixed by the model, so none of them
may reach it.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

import attrs
import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ._context import RunContext
from ._docstrings import parse_docstring

__all__ = ["Signature", "function_name", "is_run_context", "read_function"]


def is_run_context(annotation: object) -> bool:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation is RunContext or get_origin(annotation) is RunContext


def _context_deps(annotation: object) -> object:
    """The ``X`` of a ``RunContext[X]`` annotation; ``None`` for a bare ``RunContext``."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    args = get_args(annotation)
    return args[0] if args else None


def function_name(fn: object) -> str | None:
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    name = getattr(type(fn), "__name__", None)
    return name if isinstance(name, str) else None


def _has_described_field(annotation: object) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description for meta in get_args(annotation)[1:]
    )


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the titles pydantic derives from names: noise to a model, and repeated per call."""
    schema.pop("title", None)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for prop in properties.values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


@attrs.frozen
class Signature:
    """What ``@tool`` learned from a function: names in call order and the argument model."""

    takes_context: bool
    context_deps: object  # the X of its RunContext[X], or None
    names: tuple[str, ...]
    model: type[pydantic.BaseModel]
    parameters: dict[str, Any]
    description: str | None


def read_function(fn: Callable[..., Any], owner: str, description: str | None) -> Signature:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{owner}: cannot read the signature of {fn!r} ({exc})") from None
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = getattr(target, "__call__", target)  # noqa: B004
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # NameError for an unresolvable forward reference, mostly
        raise TypeError(
            f"{owner}: cannot resolve the type hints of {fn!r} ({type(exc).__name__}: {exc}); "
            "every name a parameter's annotation uses must be importable where the function "
            "is defined"
        ) from None
    doc = parse_docstring(inspect.getdoc(target))
    fields: dict[str, Any] = {}
    names: list[str] = []
    takes_context = False
    context_deps: object = None
    for position, parameter in enumerate(signature.parameters.values()):
        annotation = hints.get(parameter.name, parameter.annotation)
        if is_run_context(annotation):
            if position != 0:
                raise TypeError(
                    f"{owner}: parameter {parameter.name!r} is a RunContext but not the first "
                    "parameter; make it the first (it is injected, never sent by the model)"
                )
            takes_context = True
            context_deps = _context_deps(annotation)
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            star = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{owner}: parameter {star}{parameter.name} cannot be described to a model; "
                "name and type each argument the tool takes"
            )
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{owner}: parameter {parameter.name!r} is positional-only, and a model passes "
                "arguments by name; remove the '/' from the signature"
            )
        if annotation is inspect.Parameter.empty:
            raise TypeError(
                f"{owner}: parameter {parameter.name!r} has no type annotation; annotate it "
                "(the model is told the type, and the arguments are validated against it)"
            )
        default = (
            PydanticUndefined if parameter.default is inspect.Parameter.empty else parameter.default
        )
        text = doc.parameters.get(parameter.name)
        # Only a description we have: an explicit None would override the one an
        # Annotated[..., Field(description=...)] carries.
        if text is not None and not _has_described_field(annotation):
            info = pydantic.Field(default, alias=parameter.name, description=text)
        else:
            info = pydantic.Field(default, alias=parameter.name)
        fields[f"p{len(names)}"] = (annotation, info)
        names.append(parameter.name)
    model_name = function_name(fn) or "tool"
    try:
        model = pydantic.create_model(
            f"{model_name}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        parameters = _clean_schema(model.model_json_schema())
    except (pydantic.PydanticUserError, pydantic.ValidationError, TypeError, ValueError) as exc:
        raise TypeError(_inexpressible(owner, fields, names, exc)) from None
    return Signature(
        takes_context,
        context_deps,
        tuple(names),
        model,
        parameters,
        description or doc.description,
    )


def _inexpressible(owner: str, fields: dict[str, Any], names: list[str], exc: Exception) -> str:
    for (annotation, _info), name in zip(fields.values(), names, strict=True):
        try:
            pydantic.TypeAdapter(annotation).json_schema()
        except Exception as inner:  # any failure names the parameter; the reason follows
            return (
                f"{owner}: parameter {name!r} has type {annotation!r}, which pydantic cannot "
                f"express as JSON Schema ({type(inner).__name__}: {inner})"
            )
    return f"{owner}: the parameters cannot be expressed as JSON Schema ({exc})"
