"""canonical_json at the edges: JavaScript's key order, numbers past a double, depth, and node.

The node test hands the same values to JavaScript, canonicalized as a
TypeScript host does it (keys sorted, then ``JSON.stringify``), and compares
texts byte for byte. It is skipped where node is not installed, except in CI,
where a skip would hide the one check that the two hosts hash alike.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio.completion import ToolCallArgumentsError, parse_tool_call_arguments
from juno_bind_trio.run import canonical_json, tool_call_args_hash


def nested(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for k in range(depth):
        value = [value] if k % 2 else {"k": value}
    return value


# --- key order ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"10": 1, "2": 2}, '{"2":2,"10":1}'),
        ({"b": 1, "10": 2, "a": 3, "2": 4, "0": 5}, '{"0":5,"2":4,"10":2,"a":3,"b":1}'),
        # Not array indices: leading zeros, signs, fractions, and 2**32 - 1 and up.
        ({"01": 1, "-1": 2, "1.0": 3, "1": 4}, '{"1":4,"-1":2,"01":1,"1.0":3}'),
        ({"4294967295": 1, "4294967294": 2, "9": 3}, '{"9":3,"4294967294":2,"4294967295":1}'),
        ({"\uff11": 1, "1": 2}, '{"1":2,"\uff11":1}'),  # a fullwidth digit is no index
        ({"a": {"20": 1, "3": 2}}, '{"a":{"3":2,"20":1}}'),
    ],
)
def test_array_index_keys_come_first_in_numeric_order_as_in_javascript(
    value: Any, text: str
) -> None:
    assert canonical_json(value) == text


def test_the_hash_of_integer_like_keys_is_the_hash_of_the_javascript_text() -> None:
    import hashlib

    expected = hashlib.sha256(b'{"2":2,"10":1}').hexdigest()
    assert tool_call_args_hash({"10": 1, "2": 2}) == expected


# --- numbers past a double, and depth -------------------------------------------------


@pytest.mark.parametrize(
    "number", [10**400, -(10**400), 2**1024, 10**5000], ids=["1e400", "-1e400", "2**1024", "1e5000"]
)
def test_an_integer_past_the_largest_double_is_a_value_error_naming_where(number: int) -> None:
    with pytest.raises(ValueError, match=r"^canonical_json: \$\.a\[1\] is an integer of about"):
        canonical_json({"a": [0, number]})


def test_the_largest_double_as_an_integer_is_still_a_number() -> None:
    largest = int(1.7976931348623157e308)
    assert canonical_json(largest) == canonical_json(1.7976931348623157e308)


def test_nesting_up_to_the_limit_is_written_and_past_it_refused() -> None:
    text = canonical_json(nested(500))
    assert text.count("[") + text.count("{") == 500
    for depth in (502, 1_000, 20_000):
        with pytest.raises(ValueError, match="nests more than 500 containers deep") as info:
            canonical_json(nested(depth))
        assert str(info.value).startswith("canonical_json: $[0].k[0].k")
        assert "...480 more..." in str(info.value)  # the path to the 501st container
        assert len(str(info.value)) < 300  # the path is shortened, not 20,000 steps long


def test_a_value_that_cannot_be_shown_in_full_is_named_briefly() -> None:
    with pytest.raises(TypeError, match=r"^canonical_json: \$\.a is a set") as info:
        canonical_json({"a": {frozenset(range(10_000))}})
    assert len(str(info.value)) < 300


# --- what parse_tool_call_arguments accepts, canonical_json can hash ---------------------


@pytest.mark.parametrize(
    "raw",
    ['{"a": 1e400}', '{"a": -1e400}', '{"a": [1, 1E+999]}', '{"a": ' + "9" * 400 + "}"],
)
def test_a_number_past_the_largest_double_is_refused_by_the_parser(raw: str) -> None:
    with pytest.raises(ToolCallArgumentsError, match="past the largest double"):
        parse_tool_call_arguments(raw)


def test_a_tiny_number_underflows_to_zero_as_it_does_everywhere() -> None:
    assert parse_tool_call_arguments('{"a": 1e-400}') == {"a": 0.0}


def test_arguments_nested_past_the_limit_are_refused_by_the_parser() -> None:
    def levels(depth: int) -> str:  # an object holding depth - 1 more containers
        return '{"x": ' + json.dumps(nested(depth - 1)) + "}"

    tool_call_args_hash(parse_tool_call_arguments(levels(500)))
    for depth in (501, 900, 100_000):
        with pytest.raises(ToolCallArgumentsError, match="not valid JSON"):
            parse_tool_call_arguments(levels(depth) if depth < 1_000 else "[" * depth)


_edge_text = st.sampled_from(
    [
        '{"a": 1e308}',
        '{"a": 2e308}',
        '{"a": ' + "9" * 308 + "}",
        '{"a": ' + "9" * 309 + "}",
        '{"a": 179769313486231570' + "0" * 291 + "}",
    ]
)


@given(
    st.one_of(
        _edge_text,
        st.integers(0, 700).map(
            lambda d: json.dumps(nested(d)) if d % 2 else '{"x":' + json.dumps(nested(d)) + "}"
        ),
        st.recursive(
            st.none() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
        ).map(lambda v: json.dumps({"v": v}) if v == v else "{}"),
    )
)
def test_whatever_the_parser_accepts_can_be_hashed(raw: str) -> None:
    try:
        arguments = parse_tool_call_arguments(raw)
    except ToolCallArgumentsError:
        return
    tool_call_args_hash(arguments)


# --- against JavaScript itself --------------------------------------------------------

_NODE_CANONICAL = r"""
const sortKeys = (v) =>
  Array.isArray(v) ? v.map(sortKeys)
  : v !== null && typeof v === "object"
    ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]))
    : v;
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean);
process.stdout.write(lines.map((l) => JSON.stringify(sortKeys(JSON.parse(l)))).join("\n"));
"""

_KEYS = [
    "0",
    "1",
    "2",
    "9",
    "10",
    "11",
    "100",
    "01",
    "-1",
    "1.5",
    "4294967294",
    "4294967295",
    "a",
    "B",
    "_",
    "é",
    "\U0001f600",
    "\uff10",
    "",
    " 1",
    "1e3",
]
_NUMBERS = [
    0,
    -0.0,
    1,
    -1,
    1.5,
    0.1,
    1e21,
    1e-7,
    1e-6,
    123e-20,
    2**53,
    2**53 + 1,
    2**60,
    -(2**70),
    5e-324,
    1.7976931348623157e308,
    0.000001234,
    1e16,
    12345678.9,
]


def _random_value(rnd: random.Random, depth: int = 0) -> Any:
    kind = rnd.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rnd.choice([None, True, False])
    if kind == 1:
        return rnd.choice(_NUMBERS)
    if kind == 2:
        return rnd.choice([rnd.randint(-(2**80), 2**80), rnd.uniform(-1e6, 1e6)])
    if kind in (3, 4):
        return "".join(
            rnd.choice(["a", "\n", '"', "\\", "é", "\ud800", "\U0001f600", "\x01"])
            for _ in range(rnd.randrange(4))
        )
    if kind == 5:
        return [_random_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {rnd.choice(_KEYS): _random_value(rnd, depth + 1) for _ in range(rnd.randrange(6))}


def test_the_text_is_the_one_a_typescript_host_writes() -> None:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed: CI must compare canonical_json with JavaScript")
        pytest.skip("node is not installed")
    rnd = random.Random(20261130)
    values = [_random_value(rnd) for _ in range(2_000)]
    values += [{"10": 1, "2": 2}, {"b": {"3": [], "a": 1, "20": None}}]
    given_text = "\n".join(json.dumps(v) for v in values)
    done = subprocess.run(
        [node, "-e", _NODE_CANONICAL],
        input=given_text,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    theirs = done.stdout.split("\n")
    assert len(theirs) == len(values)
    for value, text in zip(values, theirs, strict=True):
        assert canonical_json(value) == text, value
