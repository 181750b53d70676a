// The reader rules of the shipped client, case by case.
import { deepStrictEqual, equal, throws } from "node:assert/strict";
import { test } from "node:test";

import { DEFAULT_MAX_HELD, RunText, TurnText, checkEvent } from "../../../src/juno_bind_trio/web/static/turn-view.js";

const t = (epoch, seq, text, turnId = "t1") => ({ kind: "text", turnId, epoch, seq, text });
const r = (epoch, seq, turnId = "t1") => ({ kind: "reset", turnId, epoch, seq, reason: "attempt_failed" });

test("in order: text appends and a reset clears", () => {
  const view = new TurnText("t1");
  for (const event of [t(0, 0, "Hel"), t(0, 1, "lo"), r(1, 2), t(1, 3, "Hi")]) equal(view.apply(event), true);
  deepStrictEqual([view.text, view.epoch, view.lastSeq, view.held], ["Hi", 1, 3, 0]);
});

test("the first delta of a turn (seq 0) is applied", () => {
  const view = new TurnText("t1");
  view.apply(t(0, 0, "first"));
  equal(view.text, "first");
});

test("reorder: an early delta waits for its gap", () => {
  const view = new TurnText("t1");
  equal(view.apply(t(0, 1, "b")), false);
  deepStrictEqual([view.text, view.held], ["", 1]);
  equal(view.apply(t(0, 0, "a")), true);
  deepStrictEqual([view.text, view.held], ["ab", 0]);
});

test("reorder: the retry's text before its own reset is not wiped by it", () => {
  const view = new TurnText("t1");
  view.apply(t(0, 0, "old"));
  view.apply(t(1, 2, "new"));
  equal(view.text, "old");
  view.apply(r(1, 1));
  equal(view.text, "new");
});

test("duplicate: replays and duplicates are dropped", () => {
  const view = new TurnText("t1");
  view.apply(t(0, 0, "a"));
  equal(view.apply(t(0, 0, "a")), false);
  view.apply(t(0, 1, "b"));
  equal(view.apply(t(0, 0, "a")), false);
  equal(view.text, "ab");
});

test("stale epoch: the wiped attempt's tail stays wiped", () => {
  const view = new TurnText("t1");
  for (const event of [r(1, 0), t(1, 1, "new"), t(0, 2, "stale")]) view.apply(event);
  equal(view.text, "new");
});

test("lost reset and hold overflow: ask for a resync instead of freezing", () => {
  const view = new TurnText("t1", { maxHeld: 3 });
  view.apply(t(0, 0, "partial of a retracted attempt"));
  for (let seq = 2; seq < 6; seq += 1) view.apply(t(1, seq, "x")); // seq 1 (the reset) was lost
  equal(view.resyncNeeded, true);
  equal(view.held, 0);
  equal(view.text, "partial of a retracted attempt");
  equal(view.apply(t(1, 6, "y")), false);
  view.resync("the persisted answer");
  deepStrictEqual([view.text, view.resyncNeeded, view.final], ["the persisted answer", false, true]);
});

test("restore continues from a mid-stream snapshot", () => {
  const view = new TurnText("t1", { maxHeld: 1 });
  view.apply(t(0, 0, "partial"));
  view.apply(t(1, 2, "x"));
  view.apply(t(1, 3, "y"));
  equal(view.resyncNeeded, true);
  view.restore({ text: "xy", epoch: 1, lastSeq: 3 });
  equal(view.resyncNeeded, false);
  equal(view.apply(t(1, 3, "y")), false);
  equal(view.apply(t(1, 4, "z")), true);
  equal(view.text, "xyz");
  // A snapshot older than the view does not move it back.
  view.restore({ text: "x", epoch: 1, lastSeq: 2 });
  equal(view.text, "xyz");
});

test("cross-turn: each turn keeps its own epoch and seq, and a finished turn ignores late events", () => {
  const run = new RunText();
  run.apply(t(0, 0, "first"));
  run.apply(r(1, 1));
  run.apply(t(1, 2, "first answer"));
  run.finalize("t1", "first answer");
  equal(run.liveTurn("t1"), undefined); // state dropped
  run.apply(t(0, 0, "second", "t2"));
  run.apply(r(1, 1, "t2"));
  deepStrictEqual(run.apply(t(1, 3, "late", "t1")), { turnId: "t1", changed: false, resyncNeeded: false });
  run.apply(t(1, 2, "second answer", "t2"));
  deepStrictEqual(run.turnIds, ["t1", "t2"]);
  deepStrictEqual([run.textOf("t1"), run.textOf("t2")], ["first answer", "second answer"]);
});

test("finalize without text keeps what shows; with text the persisted text wins", () => {
  const run = new RunText();
  run.apply(t(0, 0, "a"));
  run.apply(t(0, 2, "c"));
  run.finalize("t1");
  equal(run.textOf("t1"), "a");
  run.apply(t(0, 0, "streamed", "t2"));
  run.finalize("t2", "authoritative");
  equal(run.textOf("t2"), "authoritative");
  equal(run.isFinal("t2"), true);
  run.finalize("t2"); // a second signal without text keeps it
  equal(run.textOf("t2"), "authoritative");
  run.finalize("t2", "persisted later"); // the persisted message still wins
  equal(run.textOf("t2"), "persisted later");
});

test("a run restores final and live turns from a snapshot", () => {
  const run = new RunText();
  run.restore({ turnId: "t1", text: "done", final: true });
  run.restore({ turnId: "t2", text: "so f", epoch: 0, lastSeq: 1, final: false });
  run.apply(t(0, 1, "f", "t2"));
  run.apply(t(0, 2, "ar", "t2"));
  deepStrictEqual([run.textOf("t1"), run.textOf("t2")], ["done", "so far"]);
});

test("malformed events and options are refused with a TypeError naming the field", () => {
  const view = new TurnText("t1");
  throws(() => view.apply({ kind: "delta" }), /TurnText.apply: 'kind'/);
  throws(() => view.apply({ kind: "text", turnId: "", epoch: 0, seq: 0, text: "" }), /'turnId'/);
  throws(() => view.apply({ kind: "text", turnId: "t1", epoch: 0, seq: 1.5, text: "" }), /'seq'/);
  throws(() => view.apply({ kind: "text", turnId: "t1", epoch: -1, seq: 0, text: "" }), /'epoch'/);
  throws(() => view.apply({ kind: "text", turnId: "t1", epoch: 0, seq: 0 }), /'text'/);
  throws(() => view.apply({ kind: "reset", turnId: "t1", epoch: 0, seq: 0, reason: "x" }), /'reason'/);
  throws(() => checkEvent(null), /expected a turn stream event object/);
  throws(() => new TurnText(""), /turnId must be a non-empty string/);
  throws(() => new TurnText("t1", { maxHeld: 0 }), /maxHeld must be a positive integer/);
  throws(() => new RunText({ maxHeld: 1.5 }), /maxHeld must be a positive integer/);
  throws(() => view.finalize(3), /text must be a string or null/);
  throws(() => view.resync(null), /text must be a string/);
  equal(DEFAULT_MAX_HELD, 256);
});
