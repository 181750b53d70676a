"""The randomized cancellation soak (tests/loop/soak.py), a few hundred seeds per backend.

``nox -s soak`` plays 10,000 per backend; ``JUNO_SOAK_RUNS`` sets the count here.
"""

from __future__ import annotations

import os

from soak import soak

RUNS = int(os.environ.get("JUNO_SOAK_RUNS", "200"))


def test_the_soak_breaks_no_invariant(backend: str) -> None:
    broken = soak(backend, range(RUNS))
    assert broken == {}, f"{len(broken)} of {RUNS} runs broke an invariant: {broken}"
