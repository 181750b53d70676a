"""The fuzz covers the whole public surface: a public callable without an entry fails here.

To fix a failure, add an entry for the name in the ``registry_*.py`` module
of its subpackage (see ``fuzz_registry.py`` for how).
"""

from __future__ import annotations

import inspect

import pytest
from fuzz_registry import ENTRIES
from fuzz_walk import is_public_callable, public_callables, public_modules


def test_every_public_callable_has_a_fuzz_entry() -> None:
    covered = {id(entry.target) for entry in ENTRIES}
    missing = sorted(name for key, (name, _) in public_callables().items() if key not in covered)
    assert missing == [], (
        "public callables with no fuzz entry (add one to tests/fuzz/registry_<subpackage>.py): "
        + ", ".join(missing)
    )


def test_every_entry_is_a_public_callable() -> None:
    """An entry for a name that is no longer exported is stale."""
    public = public_callables()
    stale = [
        entry.test_id
        for entry in ENTRIES
        if id(entry.target) not in public
        and not inspect.ismethod(entry.target)
        and "." not in entry.target.__qualname__
    ]
    assert stale == []


def test_the_walk_finds_every_subpackage_on_disk() -> None:
    walked = set(public_modules())
    for expected in ("juno_bind_trio.run", "juno_bind_trio.schema", "juno_bind_trio.transcript"):
        assert expected in walked
    assert not any("._" in name for name in walked)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (len, True),
        (public_modules, True),
        (int, True),
        (ValueError, True),
        (pytest, False),
        (42, False),
        (list[int], False),
    ],
)
def test_what_counts_as_a_public_callable(value: object, expected: bool) -> None:
    assert is_public_callable(value) is expected


def test_protocols_typeddicts_and_aliases_are_not_callables_to_fuzz() -> None:
    from juno_bind_trio.completion import DispatchableToolCall, TurnStreamSink
    from juno_bind_trio.run import ReceiptState

    assert not is_public_callable(TurnStreamSink)
    assert not is_public_callable(DispatchableToolCall)
    assert not is_public_callable(ReceiptState)
