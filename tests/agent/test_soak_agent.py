"""The randomized soak of Agent.run / open_run (tests/agent/soak_agent.py), a seeded sample.

``nox -s soak`` plays 10,000 seeds per backend; ``JUNO_AGENT_SOAK_RUNS`` sets the count here.
"""

from __future__ import annotations

import os

from soak_agent import soak

RUNS = int(os.environ.get("JUNO_AGENT_SOAK_RUNS", "150"))


def test_the_agent_soak_breaks_no_invariant(backend: str) -> None:
    broken = soak(backend, range(RUNS))
    assert broken == {}, f"{len(broken)} of {RUNS} runs broke an invariant: {broken}"
