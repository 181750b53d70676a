// The seed's reader cases with the expectations Python's TurnTextView recorded
// (scenarios.json, written by tests/web/turn_scenarios.py): the JavaScript
// client must hold exactly the same after every step.
import { deepStrictEqual } from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { replay } from "./replay.mjs";

const scenarios = JSON.parse(readFileSync(new URL("./scenarios.json", import.meta.url), "utf8"));

test("the fixture holds the seed's cases", () => {
  const names = scenarios.map((s) => s.name.split(":")[0]);
  for (const kind of ["reorder", "duplicate", "stale epoch", "lost reset", "hold overflow", "cross-turn"]) {
    if (!names.includes(kind)) throw new Error(`scenarios.json has no ${kind} case`);
  }
});

for (const scenario of scenarios) {
  test(`agrees with TurnTextView: ${scenario.name}`, () => {
    deepStrictEqual(replay(scenario), scenario.expect);
  });
}
