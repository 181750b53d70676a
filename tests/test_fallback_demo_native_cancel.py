"""The demo's fallback scenario, cancelled the way asyncio.Runner handles Ctrl-C, at many points.

A bare ``task.cancel()`` of the task running the scenario (on trio, its
scope), before every fifth event-loop step from the first to the last: the
scenario always ends cancelled. Before the fix it ran on past its
``async with`` in a few of these windows, as if nobody had cancelled it, and
failed later with ``UnboundLocalError``. Every fifth step, not every step: the
scenario takes about five hundred, through the real ``openai`` SDK on
loopback, and each window where the cancel was lost was six steps wide.
"""

from __future__ import annotations

import io

from native_cancel import assert_always_cancelled, sweep
from test_examples import demo


async def scenario() -> None:
    await demo.fallback_scenario(io.StringIO())


def test_the_fallback_scenario_always_ends_cancelled(backend: str) -> None:
    runs = sweep(backend, scenario, lambda run: None, stride=5)
    assert_always_cancelled(runs)
    assert len(runs) > 50  # it really went through the scenario
