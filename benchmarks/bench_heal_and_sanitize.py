"""heal_transcript and sanitize_tool_schema, each against the least work its job could take.

* **heal_transcript** on a 2,000-message transcript of 400 turns (a user
  message, an assistant message with three tool calls, their answers), with
  the last turn cut short. Baseline: one pass that reads every message's
  role and copies the list, which any healer must at least do.
* **sanitize_tool_schema** on a pydantic-generated schema (an order with
  nested models, optional fields, enums, constraints). Baseline:
  ``copy.deepcopy`` of the schema, the cost of handing back an unshared copy,
  which every dialect must.

* **heal_transcript, wide**: one assistant message with 40,000 tool calls,
  half answered in its block, a quarter answered late (after a user
  message), a quarter never. Healing must stay linear in the calls: the
  budget is 0.2 s for this transcript. Baseline: read every call's id and
  every message's role, and copy the list.

Each case runs its baseline and itself in alternation for ``--rounds``
rounds (at least 11) and reports the medians, so a machine that slows down
mid-run slows both alike. Times are CPU time of this process
(``time.process_time``): on a shared machine, wall time measures the
neighbours too.

    python benchmarks/bench_heal_and_sanitize.py [--rounds R]
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from juno_bind_trio.schema import sanitize_tool_schema
from juno_bind_trio.transcript import heal_transcript


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")
    zip: str | None = None


class Line(BaseModel):
    sku: str = Field(pattern="^[A-Z0-9]+$")
    quantity: int = Field(1, ge=1, le=99)
    gift: bool = False


class PlaceOrder(BaseModel):
    """Place an order for delivery."""

    lines: list[Line] = Field(min_length=1)
    unit: Literal["kg", "lb"] = "kg"
    home: Address = Field(description="where to deliver")
    billing: Address | None = None
    note: str = Field("", max_length=200)


def transcript(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        ids = [f"call_{t}_{k}" for k in range(3)]
        messages.append({"role": "user", "content": f"step {t}"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for i in ids
                ],
            }
        )
        messages.extend({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids)
    return messages[:-2]  # the last turn cut short by a cancel


def wide_transcript(calls: int) -> list[dict[str, Any]]:
    ids = [f"call_{k}" for k in range(calls)]
    return [
        {"role": "user", "content": "do it all"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ],
        },
        *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids[0::2]),
        {"role": "user", "content": "still there?"},
        *({"role": "tool", "tool_call_id": i, "content": "late"} for i in ids[1::4]),
    ]


def interleaved_ns(
    cases: list[tuple[str, Callable[[], object]]], number: int, rounds: int
) -> list[tuple[str, float]]:
    """Median CPU ns per call of each case, the cases run in turn within each round."""
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(rounds):
        for name, fn in cases:
            gc.collect()
            start = time.process_time_ns()
            for _ in range(number):
                fn()
            samples[name].append((time.process_time_ns() - start) / number)
    return [(name, statistics.median(samples[name])) for name, _ in cases]


def report(rows: list[tuple[str, float]]) -> None:
    base = rows[0][1]
    for name, ns in rows:
        print(f"  {name:<52} {ns:>14,.0f} ns/op  {ns / base:6.2f}x")


WIDE_CALLS = 40_000
WIDE_BUDGET_S = 0.2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    rounds = max(11, parser.parse_args().rounds)

    messages = transcript(400)

    def baseline_heal() -> object:
        return [m for m in messages if m["role"]]

    print(f"heal_transcript, {len(messages)} messages (median of {rounds} rounds):")
    report(
        interleaved_ns(
            [
                ("baseline: read every role, copy the list", baseline_heal),
                ("heal_transcript", lambda: heal_transcript(messages)),
            ],
            20,
            rounds,
        )
    )

    wide = wide_transcript(WIDE_CALLS)
    calls = wide[1]["tool_calls"]

    def baseline_wide() -> object:
        ids = [c["id"] for c in calls]
        return [m for m in wide if m["role"]], ids

    print(f"heal_transcript, one message with {WIDE_CALLS:,} calls (median of {rounds} rounds):")
    rows = interleaved_ns(
        [
            ("baseline: read every id and role, copy the list", baseline_wide),
            ("heal_transcript", lambda: heal_transcript(wide)),
        ],
        1,
        rounds,
    )
    report(rows)
    seconds = rows[1][1] / 1e9
    verdict = "within" if seconds <= WIDE_BUDGET_S else "OVER"
    print(f"  {seconds:.3f} s for {WIDE_CALLS:,} calls: {verdict} the {WIDE_BUDGET_S} s budget")

    schema = PlaceOrder.model_json_schema()
    print(f"sanitize_tool_schema, pydantic PlaceOrder (median of {rounds} rounds):")
    dialects: list[Literal["openai_strict", "gemini", "anthropic"]] = [
        "openai_strict",
        "gemini",
        "anthropic",
    ]
    report(
        interleaved_ns(
            [
                ("baseline: copy.deepcopy(schema)", lambda: copy.deepcopy(schema)),
                *(
                    (
                        f"sanitize_tool_schema(dialect={d!r})",
                        lambda d=d: sanitize_tool_schema(schema, dialect=d),
                    )
                    for d in dialects
                ),
            ],
            200,
            rounds,
        )
    )


if __name__ == "__main__":
    main()
