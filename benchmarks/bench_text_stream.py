"""TurnTextStream.observe() and TurnTextView.apply() per event, against a bare baseline.

The baseline, measured in the same run: build one immutable NamedTuple event
and append it to a list, the least any "forward a delta" can cost. Prints
ns/op for each and the ratio. Target: observe() at most 2x the baseline.

    python benchmarks/bench_text_stream.py [--deltas N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import NamedTuple

from juno_bind_trio.completion import ListSink, TurnStreamEvent, TurnTextStream, TurnTextView


class BareEvent(NamedTuple):
    kind: str
    turn_id: str
    epoch: int
    seq: int
    text: str


def baseline(deltas: list[str]) -> float:
    out: list[BareEvent] = []
    append = out.append
    turn_id = "turn-1"
    start = time.perf_counter_ns()
    for seq, delta in enumerate(deltas):
        append(BareEvent("text", turn_id, 0, seq, delta))
    return time.perf_counter_ns() - start


def observe(deltas: list[str]) -> float:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="turn-1")
    stream.begin_attempt()
    observe = stream.observe
    start = time.perf_counter_ns()
    for delta in deltas:
        observe(delta)
    return time.perf_counter_ns() - start


def make_events(n: int) -> list[TurnStreamEvent]:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="turn-1")
    stream.begin_attempt()
    for i in range(n):
        stream.observe("tok")
        if i == n // 2:
            stream.begin_attempt()
    return sink.events


def view_apply(events: list[TurnStreamEvent]) -> float:
    view = TurnTextView("turn-1")
    apply = view.apply
    start = time.perf_counter_ns()
    for event in events:
        apply(event)
    return time.perf_counter_ns() - start


def best(fn: Callable[[], float], repeat: int) -> float:
    gc.collect()
    gc.disable()
    try:
        return min(fn() for _ in range(repeat))
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    n = args.deltas
    deltas = ["tok"] * n
    events = make_events(n)
    # Interleave the measurements so drift in machine load hits all three alike.
    base = obs = app = float("inf")
    for _ in range(args.repeat):
        base = min(base, best(lambda: baseline(deltas), 1))
        obs = min(obs, best(lambda: observe(deltas), 1))
        app = min(app, best(lambda: view_apply(events), 1))
    print(f"deltas per run:            {n}")
    print(f"baseline NamedTuple+append {base / n:8.1f} ns/op")
    print(
        f"TurnTextStream.observe()   {obs / n:8.1f} ns/op   ratio {obs / base:.2f}x"
        " (target <= 2.0x)"
    )
    print(f"TurnTextView.apply()       {app / n:8.1f} ns/op   ratio {app / base:.2f}x")


if __name__ == "__main__":
    main()
