"""Every public callable, given any input, returns its result or raises a documented error.

The contract each call is held to is in ``fuzz_support.py``. Examples per
callable: ``JUNO_FUZZ_EXAMPLES`` (default 25, the same ones every run); ``nox
-s fuzz`` runs thousands of fresh ones.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from fuzz_registry import ENTRIES
from fuzz_support import Call, Entry, judge
from hypothesis import HealthCheck, given, settings

EXAMPLES = int(os.environ.get("JUNO_FUZZ_EXAMPLES", "25"))
# The default run draws the same examples every time, so a green CI stays green;
# ``nox -s fuzz`` sets JUNO_FUZZ_EXAMPLES and draws new ones on every run.
RANDOM = "JUNO_FUZZ_EXAMPLES" in os.environ


def _param(entry: Entry) -> Any:
    marks = [pytest.mark.xfail(reason=entry.xfail, strict=True)] if entry.xfail else []
    return pytest.param(entry, id=entry.test_id, marks=marks)


@pytest.mark.parametrize("entry", [_param(entry) for entry in ENTRIES])
def test_fuzz(entry: Entry) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
        derandomize=not RANDOM,
    )
    @given(entry.strategy())
    def fuzz(arguments: Call) -> None:
        judge(entry, arguments)

    fuzz()
