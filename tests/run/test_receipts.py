"""Receipts: canonical JSON, the arguments' hash, the key, and the resume decision table."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import math
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio.run import (
    EffectResumability,
    ReceiptDecision,
    ReceiptState,
    ToolCallReceiptKey,
    canonical_json,
    decide_tool_call_receipt,
    tool_call_args_hash,
    tool_call_receipt_key_string,
)

# --- canonical JSON -------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def shuffled(value: Any, rnd: Any) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rnd) for v in value]
    return value


@given(json_values, st.randoms())
def test_key_order_does_not_change_the_text(value: Any, rnd: Any) -> None:
    assert canonical_json(shuffled(value, rnd)) == canonical_json(value)


def same_json(parsed: Any, value: Any) -> bool:
    """Equal as JSON values: numbers compare as the doubles JSON means by them."""
    if isinstance(value, dict):
        return (
            isinstance(parsed, dict)
            and parsed.keys() == value.keys()
            and all(same_json(parsed[k], value[k]) for k in value)
        )
    if isinstance(value, list):
        return (
            isinstance(parsed, list)
            and len(parsed) == len(value)
            and all(same_json(p, v) for p, v in zip(parsed, value, strict=True))
        )
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        # An int past 2**53 is written as the double JavaScript would hold.
        return isinstance(parsed, (int, float)) and float(parsed) == float(value)
    if isinstance(value, float):
        # An integral float past 2**53 is written as JavaScript writes it, in full
        # ("40643373342356130"), which Python reads back as an int of that double.
        return isinstance(parsed, (int, float)) and float(parsed) == value
    return type(parsed) is type(value) and parsed == value


@given(json_values)
def test_the_text_round_trips(value: Any) -> None:
    text = canonical_json(value)
    assert same_json(json.loads(text), value)
    assert canonical_json(json.loads(text)) == text  # a fixed point


bmp_text = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=8)
# Keys that are not array indices: those JavaScript (and so canonical_json) puts
# first, where json.dumps(sort_keys=True) sorts them as strings.
plain_keys = bmp_text.filter(lambda key: not (key.isascii() and key.isdigit()))
integral_values = st.recursive(
    # Integers within 2**53: past it JavaScript holds the nearest double (tested above).
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | bmp_text,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(plain_keys, children, max_size=5)
    ),
    max_leaves=25,
)


@given(integral_values)
def test_without_floats_or_astral_keys_it_is_compact_sorted_json(value: Any) -> None:
    """Where Python's json module and JavaScript agree, the text is exactly theirs."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected


@given(json_values)
def test_the_text_encodes_to_utf8(value: Any) -> None:
    canonical_json(value).encode("utf-8")  # lone surrogates are escaped, never raw


def test_the_text_is_compact_and_sorted() -> None:
    assert canonical_json({"b": [1, {"d": None, "c": True}], "a": "x"}) == (
        '{"a":"x","b":[1,{"c":true,"d":null}]}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # Each checked against Node's JSON.stringify, so a TypeScript host agrees.
        (1.0, "1"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (1.5e16, "15000000000000000"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-123.456, "-123.456"),
        (2**60, "1152921504606847000"),
        (-(2**60), "-1152921504606847000"),
        (2**53 + 1, "9007199254740992"),
        (2**53, "9007199254740992"),
        (10**21, "1e+21"),
        (123456789012345678901234567890, "1.2345678901234568e+29"),
        (4.064337334235613e16, "40643373342356130"),
        ('line\nquote"back\\slash\x01\u2028é', '"line\\nquote\\"back\\\\slash\\u0001\u2028é"'),
        ("\ud800", '"\\ud800"'),
        # UTF-16 order: U+E000 sorts after U+1F600 (a surrogate pair starts at D83D)
        ({"\ue000": 1, "\U0001f600": 2, "Z": 3, "a": 4}, '{"Z":3,"a":4,"😀":2,"\ue000":1}'),
    ],
)
def test_numbers_strings_and_key_order_match_javascript(value: object, text: str) -> None:
    assert canonical_json(value) == text


def test_tuples_are_arrays_and_int_enums_are_numbers() -> None:
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    assert canonical_json((1, Level.HIGH, [Level.HIGH])) == "[1,3,[3]]"


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ({"a": [1, math.nan]}, ValueError, "canonical_json: $.a[1] is nan, which JSON cannot"),
        ({"x": {"y z": math.inf}}, ValueError, 'canonical_json: $.x["y z"] is inf'),
        (-math.inf, ValueError, "canonical_json: $ is -inf"),
        (
            {"when": {1, 2}},
            TypeError,
            "canonical_json: $.when is a set ({1, 2}), which is not JSON",
        ),
        ([b"raw"], TypeError, "canonical_json: $[0] is a bytes"),
        ({1: "a"}, TypeError, "canonical_json: $ has a key 1 that is not a string"),
    ],
)
def test_what_is_not_json_is_refused_with_its_path(
    value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        canonical_json(value)
    assert str(info.value).startswith(message)


def test_a_container_that_contains_itself_is_refused() -> None:
    loop: list[object] = [1]
    loop.append({"again": loop})
    with pytest.raises(ValueError, match=r"^canonical_json: \$\[1\]\.again contains itself"):
        canonical_json(loop)


def test_the_same_object_twice_is_not_a_cycle() -> None:
    shared = {"k": 1}
    assert canonical_json([shared, shared]) == '[{"k":1},{"k":1}]'


# --- the hash and the key ------------------------------------------------------------


def test_the_hash_is_sha256_of_the_canonical_text() -> None:
    args = {"to": ["ann@example.com"], "subject": "Hi", "n": 1.0, "price": 12.5}
    # sha256 of {"n":1,"price":12.5,"subject":"Hi","to":["ann@example.com"]}, as Node computes it
    expected = "cf1fc72159aa650e0cbd91e3f728cda19b908bc3d5452fc0ddf6bdcfec6f712d"
    assert tool_call_args_hash(args) == expected
    reordered = json.loads('{"price": 12.5, "n": 1, "subject": "Hi", "to": ["ann@example.com"]}')
    assert tool_call_args_hash(reordered) == expected
    assert tool_call_args_hash({**args, "n": 2}) != expected


def test_the_digest_is_injectable() -> None:
    def keyed(data: bytes) -> str:
        return hmac.new(b"secret", data, hashlib.sha256).hexdigest()

    seen: list[bytes] = []

    def spy(data: bytes) -> str:
        seen.append(data)
        return "h"

    assert tool_call_args_hash({"a": 1}, digest=keyed) == keyed(b'{"a":1}')
    assert tool_call_args_hash({"b": "é"}, digest=spy) == "h"
    assert seen == ['{"b":"é"}'.encode()]


@pytest.mark.parametrize("bad", ["", None, b"x"])
def test_a_digest_must_return_a_non_empty_string(bad: object) -> None:
    with pytest.raises(TypeError, match="digest must return a non-empty string"):
        tool_call_args_hash({}, digest=lambda _: bad)  # type: ignore[arg-type,return-value]


def test_the_key_string_is_versioned_and_unambiguous() -> None:
    key = ToolCallReceiptKey(run_id="r1", tool_call_id="call_0", tool_name="send", args_hash="ab")
    assert tool_call_receipt_key_string(key) == "v1:r1:call_0:send:ab"
    # ids containing the separator cannot collide
    a = ToolCallReceiptKey(run_id="a:b", tool_call_id="c", tool_name="t", args_hash="h")
    b = ToolCallReceiptKey(run_id="a", tool_call_id="b:c", tool_name="t", args_hash="h")
    assert tool_call_receipt_key_string(a) != tool_call_receipt_key_string(b)
    assert tool_call_receipt_key_string(a) == "v1:a%3Ab:c:t:h"


@given(
    st.lists(st.text(min_size=1, max_size=6), min_size=4, max_size=4),
    st.lists(st.text(min_size=1, max_size=6), min_size=4, max_size=4),
)
def test_distinct_keys_give_distinct_strings(one: list[str], two: list[str]) -> None:
    names = ("run_id", "tool_call_id", "tool_name", "args_hash")
    a = ToolCallReceiptKey(**dict(zip(names, one, strict=True)))
    b = ToolCallReceiptKey(**dict(zip(names, two, strict=True)))
    assert (tool_call_receipt_key_string(a) == tool_call_receipt_key_string(b)) == (a == b)


def test_key_parts_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match=r"^ToolCallReceiptKey: tool_name must be a non-empty"):
        ToolCallReceiptKey(run_id="r", tool_call_id="c", tool_name="", args_hash="h")
    with pytest.raises(TypeError, match="key must be a ToolCallReceiptKey"):
        tool_call_receipt_key_string("v1:r:c:t:h")  # type: ignore[arg-type]


# --- the decision table ---------------------------------------------------------------

EXPECTED: dict[tuple[str, str], str] = {
    ("absent", "repeatable"): "run",
    ("absent", "non_repeatable"): "run",
    ("not_run", "repeatable"): "run",
    ("not_run", "non_repeatable"): "run",
    ("started", "repeatable"): "run",
    ("started", "non_repeatable"): "refuse",
    ("interrupted", "repeatable"): "run",
    ("interrupted", "non_repeatable"): "refuse",
    ("succeeded", "repeatable"): "reuse",
    ("succeeded", "non_repeatable"): "reuse",
    ("failed", "repeatable"): "reuse",
    ("failed", "non_repeatable"): "reuse",
}


def test_the_table_covers_every_state_and_resumability() -> None:
    every = set(itertools.product(get_args(ReceiptState), get_args(EffectResumability)))
    assert every == set(EXPECTED)


@pytest.mark.parametrize(("state", "resumability"), sorted(EXPECTED))
def test_each_cell_of_the_table(state: ReceiptState, resumability: EffectResumability) -> None:
    decision = decide_tool_call_receipt(state, resumability)
    assert isinstance(decision, ReceiptDecision)
    assert decision.action == EXPECTED[state, resumability]
    assert decision.reason


@given(st.sampled_from(get_args(ReceiptState)), st.sampled_from(get_args(EffectResumability)))
def test_a_non_repeatable_effect_that_may_have_happened_never_runs(
    state: ReceiptState, resumability: EffectResumability
) -> None:
    """The safety property, stated on its own: "run" for a non-repeatable tool only when
    the call provably never started."""
    action = decide_tool_call_receipt(state, resumability).action
    if resumability == "non_repeatable" and action == "run":
        assert state in ("absent", "not_run")
    if state in ("succeeded", "failed"):
        assert action == "reuse"


def test_a_refusal_says_to_check_the_effect() -> None:
    decision = decide_tool_call_receipt("interrupted", "non_repeatable")
    assert "check it before running the call again" in decision.reason


@pytest.mark.parametrize(
    ("state", "resumability", "error", "message"),
    [
        ("done", "repeatable", ValueError, "state must be one of"),
        (["started"], "repeatable", TypeError, "state must be one of"),
        ("started", "idempotent", ValueError, "resumability must be one of"),
        ("started", None, TypeError, "got None"),
    ],
)
def test_unknown_values_are_refused_by_name(
    state: Any, resumability: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=r"^decide_tool_call_receipt: ") as info:
        decide_tool_call_receipt(state, resumability)
    assert message in str(info.value)
