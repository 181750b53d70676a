// Runs reader scenarios through the shipped client and records, after each
// step, what it holds, in the same shape as tests/web/turn_scenarios.py.
//
//   node replay.mjs scenarios.json   -> JSON list (one list of steps per scenario)

import { readFileSync } from "node:fs";
import { argv, stdout } from "node:process";
import { fileURLToPath } from "node:url";

import { RunText } from "../../../src/juno_bind_trio/web/static/turn-view.js";

export function replay(scenario) {
  const run = new RunText({ maxHeld: scenario.maxHeld });
  const out = [];
  for (const step of scenario.steps) {
    let changed = null;
    if (step.op === "apply") {
      changed = run.apply(step.event).changed;
    } else if (step.op === "finalize") {
      run.finalize(step.turnId, step.text);
    } else if (step.op === "resync") {
      run.resync(step.turnId, step.text);
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
    const turns = run.turnIds.map((turnId) => {
      if (run.isFinal(turnId)) return { turnId, text: run.textOf(turnId), final: true };
      const live = run.liveTurn(turnId);
      return {
        turnId,
        text: live.text,
        final: false,
        epoch: live.epoch,
        lastSeq: live.lastSeq,
        held: live.held,
        resyncNeeded: live.resyncNeeded,
      };
    });
    out.push({ changed, turns });
  }
  return out;
}

if (argv[1] === fileURLToPath(import.meta.url)) {
  const scenarios = JSON.parse(readFileSync(argv[2], "utf8"));
  stdout.write(JSON.stringify(scenarios.map(replay)));
}
