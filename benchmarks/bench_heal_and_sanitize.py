"""heal_transcript and sanitize_tool_schema, each against the least work its job could take.

* **heal_transcript** on a 2,000-message transcript of 400 turns (a user
  message, an assistant message with three tool calls, their answers), with
  the last turn cut short. Baseline: one pass that reads every message's
  role and copies the list, which any healer must at least do.
* **sanitize_tool_schema** on a pydantic-generated schema (an order with
  nested models, optional fields, enums, constraints). Baseline:
  ``copy.deepcopy`` of the schema, the cost of handing back an unshared copy,
  which every dialect must.

Both are per-call costs of functions a host calls once per resume or once per
tool definition, so the ratio is reported, not targeted.

    python benchmarks/bench_heal_and_sanitize.py [--repeat R]
"""

from __future__ import annotations

import argparse
import copy
import gc
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


def best_ns(fn: Callable[[], object], number: int, repeat: int) -> float:
    gc.collect()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / number)
    return best


def report(rows: list[tuple[str, float]]) -> None:
    base = rows[0][1]
    for name, ns in rows:
        print(f"  {name:<52} {ns:>12,.0f} ns/op  {ns / base:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat

    messages = transcript(400)

    def baseline_heal() -> object:
        return [m for m in messages if m["role"]]

    print(f"heal_transcript, {len(messages)} messages (best of {repeat}):")
    report(
        [
            ("baseline: read every role, copy the list", best_ns(baseline_heal, 50, repeat)),
            ("heal_transcript", best_ns(lambda: heal_transcript(messages), 50, repeat)),
        ]
    )

    schema = PlaceOrder.model_json_schema()
    print(f"sanitize_tool_schema, pydantic PlaceOrder (best of {repeat}):")
    dialects: list[Literal["openai_strict", "gemini", "anthropic"]] = [
        "openai_strict",
        "gemini",
        "anthropic",
    ]
    report(
        [
            (
                "baseline: copy.deepcopy(schema)",
                best_ns(lambda: copy.deepcopy(schema), 500, repeat),
            ),
            *(
                (
                    f"sanitize_tool_schema(dialect={d!r})",
                    best_ns(lambda d=d: sanitize_tool_schema(schema, dialect=d), 500, repeat),  # type: ignore[misc]
                )
                for d in dialects
            ),
        ]
    )


if __name__ == "__main__":
    main()
