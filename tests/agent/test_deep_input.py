"""Input nested as deep as the JSON parser reads: a validation failure or a re-ask, never a crash.

Reading ``null`` as "not given" walks the value a second time when the first
reading failed; that walk keeps a stack of its own, so a recursive model a
few hundred levels deep is answered like any other bad input.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers
from hypothesis import given, settings
from hypothesis import strategies as st

from juno_bind_trio._json import follow_ref as _resolve
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.agent._tool_nulls import _accepts_null, drop_absent_nulls

pytestmark = pytest.mark.anyio


class Node(pydantic.BaseModel):
    children: list[Node] = []
    note: str = "d"


def nested(depth: int) -> str:
    """*depth* Nodes, each the only child of the one above, with ``"note": null`` at the bottom."""
    return '{"children": [' * depth + '{"children": [], "note": null}' + '], "note": "x"}' * depth


@tool
async def take(root: Node) -> str:
    return "taken"


@pytest.mark.parametrize("depth", [300, 350, 400, 450, 480, 900])
async def test_deep_tool_arguments_are_a_validation_failure(depth: int) -> None:
    model = ScriptedModel(
        [Say(calls=[call("c1", "take", '{"root": ' + nested(depth) + "}")]), Say(text="ok")]
    )
    result = await Agent(model, tools=[take]).run("go")
    answer = tool_answers(result.messages)["c1"]
    assert answer["kind"] == "validation"
    assert answer["error"].startswith("invalid arguments for take: ")


@pytest.mark.parametrize("depth", [300, 350, 400, 450, 480, 900])
async def test_a_deep_answer_is_reasked(depth: int) -> None:
    model = ScriptedModel([Say(text=nested(depth)), Say(text='{"children": [], "note": "ok"}')])
    result = await Agent(model, output_type=Node).run("go")
    assert result.output == Node(note="ok")
    assert result.stats.model_calls == 2
    reask = model.seen[1][-1]
    assert reask["role"] == "user"
    assert reask["content"].startswith("Your answer does not match the required output")


async def test_a_shallow_null_is_still_read_as_not_given() -> None:
    model = ScriptedModel([Say(text=nested(3))])
    result = await Agent(model, output_type=Node).run("go")
    bottom = result.output
    for _ in range(3):
        bottom = bottom.children[0]
    assert bottom.note == "d"


# --- the walk agrees with the recursive reading it replaced ------------------------------


def reference(value: Any, schema: Any, root: Any) -> Any:
    """The recursive ``drop_absent_nulls`` the iterative one replaced, for comparison."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return value
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and isinstance(value, dict | list):
        wanted = "object" if isinstance(value, dict) else "array"
        for option in options:
            resolved = _resolve(option, root)
            if isinstance(resolved, dict) and resolved.get("type") == wanted:
                return reference(value, resolved, root)
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value
        required = set(schema.get("required") or ())
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                cleaned[key] = item
            elif item is None and key not in required and not _accepts_null(sub, root):
                continue
            else:
                cleaned[key] = reference(item, sub, root)
        return cleaned
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [reference(item, items, root) for item in value]
    return value


class Leaf(pydantic.BaseModel):
    label: str = "l"
    weight: int | None = None


class Tree(pydantic.BaseModel):
    name: str
    note: str = "n"
    leaves: list[Leaf] = []
    child: Tree | None = None
    either: Leaf | list[Leaf] | None = None
    extra: dict[str, int] = {}


SCHEMA = Tree.model_json_schema()
scalars = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3), st.booleans())
keys = st.sampled_from(["name", "note", "leaves", "child", "either", "extra", "label", "weight"])
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(keys, values, max_size=6))
def test_the_walk_reads_every_value_as_the_recursive_reading_did(value: dict[str, Any]) -> None:
    before = json.dumps(value, sort_keys=True)
    assert drop_absent_nulls(value, SCHEMA, SCHEMA) == reference(value, SCHEMA, SCHEMA)
    assert json.dumps(value, sort_keys=True) == before  # the input is not changed


def test_follow_ref_follows_local_pointers_and_leaves_the_rest() -> None:
    """The one $ref reader of "null means not given" and of MCP's arguments."""
    root = {
        "$defs": {
            "A": {"$ref": "#/$defs/B"},
            "B": {"type": "integer"},
            "a/b~c": {"type": "string"},
            "Loop": {"$ref": "#/$defs/Loop"},
        }
    }
    assert _resolve({"$ref": "#/$defs/A"}, root) == {"type": "integer"}  # two hops
    assert _resolve({"$ref": "#/$defs/a~1b~0c"}, root) == {"type": "string"}  # escapes
    for kept in ({"$ref": "other.json#/x"}, {"$ref": 3}, {"type": "null"}, [1], None):
        assert _resolve(kept, root) is kept
    # A pointer through a non-object leaves the schema; one naming nothing gives None.
    through = {"$ref": "#/$defs/B/type/x"}
    assert _resolve(through, root) is through
    assert _resolve({"$ref": "#/$defs/Missing"}, root) is None
    # A cycle ends after a bounded number of hops, on the cycle.
    assert _resolve({"$ref": "#/$defs/Loop"}, root) == {"$ref": "#/$defs/Loop"}
