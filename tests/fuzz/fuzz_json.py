"""Strategies for JSON-like values and JSON text, shared by the document-reading entries."""

from __future__ import annotations

import json
from typing import Any, Final

import hypothesis.strategies as st
from fuzz_support import DEEP, HUGE, JUNK

__all__ = ["JSON_TEXT", "JSON_VALUES", "KEYS"]

KEYS: Final = st.one_of(
    st.text(max_size=6),
    st.sampled_from(
        ["0", "1", "2", "10", "01", "-1", "4294967294", "4294967295", "1.5", "\U0001f600"]
    ),
    st.integers(0, 2**32).map(str),
)
"""Object keys, many of them integer-like, which JavaScript orders first."""

_json_leaves: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(HUGE),
    st.floats(),
    st.text(max_size=8),
)

JSON_VALUES: Final[st.SearchStrategy[Any]] = st.one_of(
    st.recursive(
        _json_leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(KEYS, inner, max_size=5),
        ),
        max_leaves=16,
    ),
    DEEP,
    JUNK,
)
"""JSON-shaped values (with non-finite and huge numbers), deep ones and junk."""


def _dump(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return "{}"


JSON_TEXT: Final[st.SearchStrategy[str]] = st.one_of(
    JSON_VALUES.map(_dump),
    st.dictionaries(KEYS, _json_leaves, max_size=4).map(_dump),
    st.sampled_from(
        [
            '{"a": 1e400}',
            '{"a": -1e400}',
            '{"a": 1e-400}',
            '{"a": NaN}',
            '{"a": Infinity}',
            '{"a": [1, 2e308]}',
            '{"a": ' + "9" * 5000 + "}",
            "[" * 100_000 + "]" * 100_000,
            '{"a":' * 5000 + "1" + "}" * 5000,
            '{"a": "\\ud800"}',
            "",
            " ",
            "null",
            "{",
        ]
    ),
    st.text(max_size=20),
)
"""Text a model might send as tool-call arguments: JSON, huge numbers, deep nesting, garbage."""
