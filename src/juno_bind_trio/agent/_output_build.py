"""How an output type (a type, a list or union, a function, or a mode of one) becomes a
run's OutputPlan.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from juno_bind_trio._errors import SchemaError
from juno_bind_trio.schema import sanitize_tool_schema

from ._output import OutputSpec, output_spec
from ._output_members import NAME_PART, Member, members_of, union_of
from ._output_modes import DEFAULT_OUTPUT_TOOL, NativeOutput, PromptedOutput, ToolOutput
from ._output_plan import ModeName, OutputPlan, OutputTool

__all__ = ["bind_output_tool", "check_output_tool_names", "output_plan"]

_DEFAULT_DESCRIPTION: Final = (
    "The final answer: call this with the answer as its arguments once you have it; "
    "the run ends with it."
)
_PROMPT: Final = (
    "Answer with only a JSON value that matches this JSON schema: no other text, "
    "no explanation.\n{schema}"
)


def _tool_definition(
    owner: str, name: str, description: str, spec: OutputSpec, *, strict: bool
) -> dict[str, Any]:
    full = spec.full_format
    assert full is not None
    schema = full["json_schema"]["schema"]
    try:
        parameters = sanitize_tool_schema(schema, dialect="openai_strict").schema
        is_strict = True
    except SchemaError as exc:
        if strict:
            raise SchemaError(
                f"{owner}: output tool {name!r} cannot be expressed in OpenAI strict mode "
                f"at {exc.pointer or '(root)'}: {exc}",
                exc.pointer,
            ) from None
        parameters = sanitize_tool_schema(schema, dialect="openai").schema
        is_strict = False
    function: dict[str, Any] = {
        "name": name,
        "description": description,
        "parameters": parameters,
    }
    if is_strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def output_plan(owner: str, output_type: object, *, strict: bool) -> OutputPlan:
    """The plan for *output_type* (a type, a list or union, a function, or a mode of one)."""
    mode: ModeName
    if isinstance(output_type, ToolOutput):
        mode, inner = "tool", output_type.output_type
    elif isinstance(output_type, NativeOutput):
        mode, inner = "native", output_type.output_type
    elif isinstance(output_type, PromptedOutput):
        mode, inner = "prompted", output_type.output_type
    else:
        mode, inner = "native", output_type
        if inner is str:
            return OutputPlan("text")
    members = members_of(owner, inner)
    functions = [m for m in members if m.function is not None]
    if mode != "tool" and len(functions) > 1:
        if isinstance(output_type, NativeOutput | PromptedOutput):
            raise TypeError(
                f"{owner}: {type(output_type).__name__} takes at most one output function; "
                "several need ToolOutput (one tool per function)"
            )
        mode = "tool"  # several functions: only tools can say which one the model chose
    if mode == "tool":
        return _tool_plan(owner, output_type, members, strict=strict)
    function = functions[0].function if functions else None
    if function is not None and len(members) > 1:
        raise TypeError(
            f"{owner}: an output function in a list with other types needs ToolOutput "
            "(one tool per member)"
        )
    value_type = union_of(members)
    if value_type is str:
        if mode == "prompted":
            raise TypeError(f"{owner}: PromptedOutput(str) asks for nothing; use output_type=str")
        return OutputPlan("text", function=function)
    spec = output_spec(owner, value_type, strict=strict)
    if mode == "prompted":
        assert spec.full_format is not None
        schema = json.dumps(spec.full_format["json_schema"]["schema"], separators=(",", ":"))
        template = output_type.template if isinstance(output_type, PromptedOutput) else None
        prompt = (template or _PROMPT).replace("{schema}", schema)
        return OutputPlan("prompted", spec=spec, function=function, prompt=prompt)
    return OutputPlan("native", spec=spec, function=function)


def _tool_plan(owner: str, given: object, members: Sequence[Member], *, strict: bool) -> OutputPlan:
    base = given.name if isinstance(given, ToolOutput) else DEFAULT_OUTPUT_TOOL
    description = given.description if isinstance(given, ToolOutput) else None
    typed = [m for m in members if not m.is_text]
    texts = tuple(m for m in members if m.is_text)
    if not typed:
        raise TypeError(f"{owner}: ToolOutput(str) asks for no tool; use output_type=str")
    tools: list[OutputTool] = []
    for member in typed:
        name = base if len(typed) == 1 else f"{base}_{NAME_PART.sub('_', member.label)}"[:64]
        if any(t.name == name for t in tools):
            raise ValueError(f"{owner}: two output tools would be named {name!r}")
        spec = output_spec(owner, member.value_type, strict=strict)
        words = description or _DEFAULT_DESCRIPTION
        if len(typed) > 1:
            words = f"{words} (the answer as a {member.label})"
        tools.append(
            OutputTool(
                name, member, spec, _tool_definition(owner, name, words, spec, strict=strict)
            )
        )
    return OutputPlan("tool", tools=tools, allows_text=bool(texts))


def check_output_tool_names(owner: str, plan: OutputPlan, tool_names: Sequence[str]) -> None:
    """A tool of the agent's named like an output tool is refused at construction."""
    for name in tool_names:
        if name in plan.tool_names:
            raise ValueError(
                f"{owner}: the tool {name!r} has the name of the output tool; rename one "
                "(tool(fn, name=...) or ToolOutput(..., name=...))"
            )


def bind_output_tool(model: Any, plan: OutputPlan) -> Any:
    """An in-process model (``testing.TestModel``) told tool mode's final-answer tool."""
    bind = getattr(model, "with_output_tool", None)
    answer = plan.test_answer()
    if answer is None or not callable(bind) or isinstance(model, str):
        return model
    return bind(*answer)
