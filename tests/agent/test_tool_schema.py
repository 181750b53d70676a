"""@tool: schemas from signatures, descriptions from three docstring styles, wiring mistakes."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal

import pydantic
import pytest
from typing_extensions import TypedDict

from juno_bind_trio import RunContext, SchemaError
from juno_bind_trio.agent import Agent, Tool, tool
from juno_bind_trio.agent._docstrings import parse_docstring
from juno_bind_trio.loop import ModelTurn, ModelTurnResult


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    width: float
    label: str | None = None


class Tag(TypedDict):
    name: str


async def f_plain(city: str, days: int) -> str:
    return ""


async def f_defaults(city: str, days: int = 3, metric: bool = True) -> str:
    return ""


async def f_literal(units: Literal["c", "f"]) -> str:
    return ""


async def f_optional(note: str | None = None) -> str:
    return ""


async def f_enum(color: Color) -> str:
    return ""


async def f_list(cities: list[str]) -> str:
    return ""


async def f_annotated(n: Annotated[int, pydantic.Field(description="How many.", ge=1)]) -> str:
    return ""


async def f_nested(point: Point) -> str:
    return ""


async def f_dataclass(box: Box) -> str:
    return ""


async def f_typeddict(tag: Tag) -> str:
    return ""


async def f_context(ctx: RunContext[int], q: str) -> str:
    return ""


async def f_none() -> str:
    return ""


SCHEMAS: list[tuple[Any, dict[str, Any]]] = [
    (
        f_plain,
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    ),
    (
        f_defaults,
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "default": 3},
                "metric": {"type": "boolean", "default": True},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
    (
        f_literal,
        {
            "type": "object",
            "properties": {"units": {"type": "string", "enum": ["c", "f"]}},
            "required": ["units"],
            "additionalProperties": False,
        },
    ),
    (
        f_optional,
        {
            "type": "object",
            "properties": {
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
            },
            "additionalProperties": False,
        },
    ),
    (
        f_enum,
        {
            "type": "object",
            "properties": {"color": {"$ref": "#/$defs/Color"}},
            "required": ["color"],
            "additionalProperties": False,
            "$defs": {"Color": {"enum": ["red", "blue"], "title": "Color", "type": "string"}},
        },
    ),
    (
        f_list,
        {
            "type": "object",
            "properties": {"cities": {"type": "array", "items": {"type": "string"}}},
            "required": ["cities"],
            "additionalProperties": False,
        },
    ),
    (
        f_annotated,
        {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1, "description": "How many."}},
            "required": ["n"],
            "additionalProperties": False,
        },
    ),
    (
        f_nested,
        {
            "type": "object",
            "properties": {"point": {"$ref": "#/$defs/Point"}},
            "required": ["point"],
            "additionalProperties": False,
            "$defs": {
                "Point": {
                    "type": "object",
                    "title": "Point",
                    "properties": {
                        "x": {"title": "X", "type": "integer"},
                        "y": {"title": "Y", "type": "integer", "default": 0},
                    },
                    "required": ["x"],
                }
            },
        },
    ),
    (
        f_dataclass,
        {
            "type": "object",
            "properties": {"box": {"$ref": "#/$defs/Box"}},
            "required": ["box"],
            "additionalProperties": False,
            "$defs": {
                "Box": {
                    "type": "object",
                    "title": "Box",
                    "properties": {
                        "width": {"title": "Width", "type": "number"},
                        "label": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None,
                            "title": "Label",
                        },
                    },
                    "required": ["width"],
                    # The arguments' extra="forbid" reaches a dataclass or TypedDict
                    # (a pydantic model keeps its own config).
                    "additionalProperties": False,
                }
            },
        },
    ),
    (
        f_typeddict,
        {
            "type": "object",
            "properties": {"tag": {"$ref": "#/$defs/Tag"}},
            "required": ["tag"],
            "additionalProperties": False,
            "$defs": {
                "Tag": {
                    "type": "object",
                    "title": "Tag",
                    "properties": {"name": {"title": "Name", "type": "string"}},
                    "required": ["name"],
                    "additionalProperties": False,
                }
            },
        },
    ),
    (
        f_context,
        {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": False,
        },
    ),
    (f_none, {"type": "object", "properties": {}, "additionalProperties": False}),
]


@pytest.mark.parametrize(("fn", "expected"), SCHEMAS, ids=[fn.__name__ for fn, _ in SCHEMAS])
def test_the_schema_of_a_signature(fn: Any, expected: dict[str, Any]) -> None:
    made = tool(fn)
    assert made.parameters == expected
    assert made.name == fn.__name__


GOOGLE = """Forecast for a city.

    Looks a few days ahead.

    Args:
        city: The city's name,
            in English.
        days (int): How many days ahead.

    Returns:
        The forecast.
    """

NUMPY = """Forecast for a city.

    Looks a few days ahead.

    Parameters
    ----------
    city : str
        The city's name,
        in English.
    days : int
        How many days ahead.

    Returns
    -------
    str
        The forecast.
    """

SPHINX = """Forecast for a city.

    Looks a few days ahead.

    :param city: The city's name,
        in English.
    :param int days: How many days ahead.
    :returns: The forecast.
    """


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_descriptions_from_each_docstring_style(doc: str) -> None:
    async def forecast(city: str, days: int = 1) -> str:
        return ""

    forecast.__doc__ = doc
    made = tool(forecast)
    assert made.description == "Forecast for a city.\n\nLooks a few days ahead."
    assert made.parameters["properties"]["city"]["description"] == "The city's name, in English."
    assert made.parameters["properties"]["days"]["description"] == "How many days ahead."


def test_a_field_description_outranks_the_docstring() -> None:
    async def f(n: Annotated[int, pydantic.Field(description="From the field.")]) -> None:
        """Do it.

        Args:
            n: From the docstring.
        """

    assert tool(f).parameters["properties"]["n"]["description"] == "From the field."


def test_explicit_name_and_description_win() -> None:
    async def f() -> None:
        """Docstring."""

    made = tool(name="other", description="Explicit.")(f)
    assert (made.name, made.description) == ("other", "Explicit.")


def test_a_docstring_without_sections_is_all_description() -> None:
    parsed = parse_docstring("Just this.\n\nAnd this.")
    assert parsed.description == "Just this.\n\nAnd this."
    assert parsed.parameters == {}
    assert parse_docstring(None).description is None


def test_parameters_with_names_pydantic_reserves_work() -> None:
    async def f(json: str, schema: int, model_config: bool = False) -> str:
        return f"{json}{schema}{model_config}"

    made = tool(f)
    assert set(made.parameters["properties"]) == {"json", "schema", "model_config"}


# --- refused at construction ------------------------------------------------------------


async def star_args(*cities: str) -> None: ...


async def star_kwargs(**options: str) -> None: ...


async def untyped(city) -> None: ...  # type: ignore[no-untyped-def]


async def context_second(city: str, ctx: RunContext[None]) -> None: ...


async def unexpressible(callback: Any) -> None: ...


async def positional_only(city: str, /) -> None: ...


class Opaque:
    pass


async def opaque(thing: Opaque) -> None: ...


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (star_args, r"\*cities cannot be described"),
        (star_kwargs, r"\*\*options cannot be described"),
        (untyped, "parameter 'city' has no type annotation"),
        (context_second, "'ctx' is a RunContext but not the first parameter"),
        (positional_only, "'city' is positional-only"),
        (opaque, "parameter 'thing' has type .*Opaque.* which pydantic cannot express"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_refused_naming_why(fn: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        tool(fn)


def test_refusals_of_values() -> None:
    with pytest.raises(TypeError, match="expected a function"):
        tool(42)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="function-name rule"):
        tool(name="has space")(f_none)
    with pytest.raises(TypeError, match="serial must be a bool"):
        tool(serial="yes")(f_none)  # type: ignore[call-overload]


async def scripted(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="x")


def test_agent_refuses_duplicate_tool_names() -> None:
    with pytest.raises(ValueError, match="two tools are named 'f_none'"):
        Agent(scripted, tools=[f_none, tool(f_none)])


def test_agent_refuses_a_non_callable_tool_and_a_sync_model() -> None:
    with pytest.raises(TypeError, match="a tool must be a Tool, a function or a Toolset"):
        Agent(scripted, tools=[42])

    def sync_model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="x")

    with pytest.raises(TypeError, match="is not async"):
        Agent(sync_model)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'openai:<model-name>'"):
        Agent("gpt-4o")


def test_strict_mode_refuses_a_tool_it_cannot_express_with_the_pointer() -> None:
    async def tagged(labels: dict[str, str]) -> None: ...

    Agent(scripted, tools=[tagged])  # fine when not strict
    with pytest.raises(SchemaError, match="tool 'tagged' cannot be expressed") as caught:
        Agent(scripted, tools=[tagged], strict=True)
    assert caught.value.pointer == "/properties/labels"


def test_strict_mode_marks_every_tool_strict_and_closes_the_schema() -> None:
    agent = Agent(scripted, tools=[f_defaults], strict=True)
    (entry,) = agent._settings.static_tool_dicts
    function = entry["function"]
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["city", "days", "metric"]


def test_from_schema_checks_its_schema_and_handler() -> None:
    async def handler(ctx: RunContext[Any], arguments: dict[str, Any]) -> str:
        return "ok"

    made = Tool.from_schema(
        name="search",
        description="Search.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        handler=handler,
    )
    assert made.parameters["properties"] == {"q": {"type": "string"}}
    with pytest.raises(ValueError, match="must describe an object"):
        Tool.from_schema(name="s", description=None, parameters={"type": "string"}, handler=handler)
    with pytest.raises(SchemaError):
        Tool.from_schema(
            name="s",
            description=None,
            parameters={"type": "object", "properties": {"q": {"type": 3}}},
            handler=handler,
        )

    def sync_handler(ctx: RunContext[Any], arguments: dict[str, Any]) -> str:
        return "ok"

    with pytest.raises(TypeError, match="handler must be an async function"):
        Tool.from_schema(
            name="s",
            description=None,
            parameters={"type": "object"},
            handler=sync_handler,  # type: ignore[arg-type]
        )
