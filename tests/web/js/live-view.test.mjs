// live-view.js against a fake EventSource and fetch: the wiring of reader,
// renderer, snapshot resync and the control endpoints.
import { deepStrictEqual, equal } from "node:assert/strict";
import { test } from "node:test";

import { LiveView } from "../../../src/juno_bind_trio/web/static/live-view.js";
import { FakeElement, fakeDocument } from "./fake-dom.mjs";

class FakeEventSource {
  static last = null;
  constructor(url) {
    this.url = url;
    this.closed = false;
    this.onmessage = null;
    FakeEventSource.last = this;
  }
  close() { this.closed = true; }
  push(id, event) { this.onmessage({ data: JSON.stringify(event), lastEventId: String(id) }); }
}

function fakeFetch(snapshot) {
  const calls = [];
  const fetch = async (url, options = {}) => {
    calls.push({ url, method: options.method ?? "GET", body: options.body });
    if (url === "/runs" && options.method === "POST") {
      return { status: 201, json: async () => ({ runId: "r1" }), text: async () => "" };
    }
    if (url.endsWith("/stop") || url.endsWith("/cancel")) {
      return { status: 200, json: async () => ({ runId: "r1", status: "stopping", changed: true }) };
    }
    return { status: 200, json: async () => snapshot.current };
  };
  return { fetch, calls };
}

const t = (epoch, seq, text, turnId = "r1:1") => ({ kind: "text", turnId, epoch, seq, text });
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

function setup(snapshot = { current: null }, maxHeld = undefined) {
  const turns = new FakeElement("section");
  const announcer = new FakeElement("div");
  const { fetch, calls } = fakeFetch(snapshot);
  const view = new LiveView({ turns, announcer, document: fakeDocument, fetch, EventSource: FakeEventSource, maxHeld });
  return { view, turns, announcer, calls };
}

test("start posts JSON and follows the run's event stream", async () => {
  const { view, calls } = setup();
  equal(await view.start("hello"), "r1");
  deepStrictEqual(calls[0], { url: "/runs", method: "POST", body: JSON.stringify({ prompt: "hello" }) });
  equal(FakeEventSource.last.url, "/runs/r1/events");
  equal(view.status, "running");
});

test("text, a reset and the turn's end render into one element, announced once", async () => {
  const { view, turns, announcer } = setup({ current: { transcript: [] } });
  view.watch("r1");
  const source = FakeEventSource.last;
  source.push(1, t(0, 0, "Let me think"));
  source.push(2, { kind: "reset", turnId: "r1:1", epoch: 1, seq: 1, reason: "attempt_failed" });
  source.push(3, t(1, 2, "Answer: 42"));
  source.push(4, { kind: "turn_ended", iteration: 1, turnId: "r1:1", content: "Answer: 42", toolCalls: 0 });
  equal(turns.children.length, 1);
  const element = turns.children[0];
  equal(element.textContent, "Answer: 42");
  equal(element.getAttribute("aria-busy"), "false");
  deepStrictEqual(announcer.writes, ["Answer: 42"]);
  deepStrictEqual(view.history.map((h) => h.text), ["Let me think", "", "Answer: 42", "Answer: 42"]);
  equal(view.lastEventId, 4);
});

test("tool calls and run status are tracked; the end closes the stream and fetches the record", async () => {
  const transcript = [{ role: "tool", tool_call_id: "c1", content: "ok" }];
  const toolCalls = [{ toolCallId: "c2", toolName: "lookup", arguments: "{\"k\": 2}", status: "not_run" }];
  const { view } = setup({ current: { transcript, turns: [], toolCalls } });
  view.watch("r1");
  const source = FakeEventSource.last;
  source.push(1, { kind: "tool_call_started", iteration: 1, toolCallId: "c1", toolName: "lookup", arguments: "{}" });
  equal(view.toolCalls.get("c1").status, "running");
  source.push(2, { kind: "tool_call_ended", iteration: 1, toolCallId: "c1", toolName: "lookup", status: "finished", failureKind: null, content: "ok" });
  source.push(3, { kind: "tool_call_ended", iteration: 1, toolCallId: "c2", toolName: "lookup", status: "not_run", failureKind: "not_run", content: "never started" });
  equal(view.toolCalls.get("c2").arguments, null);
  source.push(3, { kind: "run_status", runId: "r1", status: "stopping" });
  equal(view.status, "stopping");
  source.push(4, { kind: "run_ended", runId: "r1", reason: "stopped" });
  source.push(5, { kind: "run_status", runId: "r1", status: "ended" });
  await settle();
  deepStrictEqual(view.toolCalls.get("c1"), { toolName: "lookup", arguments: "{}", status: "finished", content: "ok" });
  equal(view.reason, "stopped");
  equal(view.toolCalls.get("c2").arguments, "{\"k\": 2}"); // filled in from the final snapshot
  equal(source.closed, true);
  deepStrictEqual(view.snapshot.transcript, transcript);
});

test("a handoff names the agent speaking from then on", async () => {
  const { view } = setup({ current: { transcript: [] } });
  view.watch("r1");
  equal(view.agent, null);
  FakeEventSource.last.push(1, { kind: "handoff", fromAgent: "triage", toAgent: "billing", toolCallId: "h1" });
  equal(view.agent, "billing");
});

test("a turn names its agent, and a resync brings the agent speaking back", async () => {
  const { view } = setup({ current: { transcript: [] } });
  view.watch("r1");
  const source = FakeEventSource.last;
  source.push(1, { kind: "turn_ended", iteration: 1, turnId: "r1:1", content: null, toolCalls: 1, agent: "triage" });
  equal(view.agent, "triage");
  const snapshot = { runId: "r1", status: "running", agent: "billing", lastEventId: 9, turns: [], toolCalls: [] };
  source.push(9, { kind: "resync", snapshot });
  equal(view.agent, "billing");
});

test("a hold-buffer overflow resyncs the turn from the snapshot and streaming continues", async () => {
  const snapshot = { current: { turns: [{ turnId: "r1:1", text: "The answer is", final: false, epoch: 1, lastSeq: 5 }] } };
  const { view, turns, calls } = setup(snapshot, 2);
  view.watch("r1");
  const source = FakeEventSource.last;
  source.push(1, t(0, 0, "a retracted attempt"));
  // seq 1..2 (the reset and the retry's first words) were lost in a reconnect.
  source.push(4, t(1, 3, "The "));
  source.push(5, t(1, 4, "answer"));
  source.push(6, t(1, 5, " is"));
  await settle();
  equal(calls.at(-1).url, "/runs/r1");
  equal(turns.children[0].textContent, "The answer is");
  source.push(7, t(1, 6, " 42."));
  equal(turns.children[0].textContent, "The answer is 42.");
});

test("stop and cancel post to the run's endpoints", async () => {
  const { view, calls } = setup();
  view.watch("r1");
  await view.stop();
  await view.cancel();
  deepStrictEqual(calls.map((c) => [c.url, c.method]), [["/runs/r1/stop", "POST"], ["/runs/r1/cancel", "POST"]]);
});

test("an unknown event kind is ignored", () => {
  const { view } = setup();
  view.watch("r1");
  FakeEventSource.last.push(1, { kind: "from_the_future" });
  equal(view.status, "running");
});

test("a resync event mid-turn restores from its snapshot and the stream goes on from there", async () => {
  const { view, turns, announcer } = setup({ current: { transcript: [], turns: [] } });
  view.watch("r1");
  const source = FakeEventSource.last;
  source.push(1, t(0, 0, "Let me "));
  // The server no longer kept events 2..9: it sends the snapshot taken at 9.
  source.push(9, {
    kind: "resync",
    snapshot: {
      runId: "r1", status: "running", reason: null, lastEventId: 9,
      turns: [{ turnId: "r1:1", text: "The answer", final: false, epoch: 1, lastSeq: 7 }],
      toolCalls: [], transcript: [],
    },
  });
  equal(turns.children[0].textContent, "The answer");
  equal(turns.children[0].getAttribute("aria-busy"), "true");
  source.push(10, t(1, 7, " is")); // already in the snapshot: dropped
  source.push(11, t(1, 8, " 42."));
  equal(turns.children[0].textContent, "The answer 42.");
  source.push(12, { kind: "turn_ended", iteration: 1, turnId: "r1:1", content: "The answer 42.", toolCalls: 0 });
  deepStrictEqual(view.history.map((h) => h.text), ["Let me ", "The answer", "The answer 42.", "The answer 42."]);
  deepStrictEqual(announcer.writes, ["The answer 42."]);
  equal(view.lastEventId, 12);
  equal(source.closed, false);
});

test("a resync of a run that ended (or is detached) ends the view once, with the final text", async () => {
  for (const status of ["ended", "detached"]) {
    const final = { runId: "r1", status, reason: status === "ended" ? "completed" : null, lastEventId: 0,
      turns: [{ turnId: "r1:1", text: "Done.", final: true }],
      toolCalls: [{ toolCallId: "c1", toolName: "lookup", arguments: "{}", status: "finished", content: "ok" }],
      transcript: [{ role: "user", content: "hi" }] };
    const { view, turns, announcer } = setup({ current: final });
    view.watch("r1");
    const source = FakeEventSource.last;
    source.push(3, t(0, 0, "Do"));
    source.push(0, { kind: "resync", snapshot: final });
    if (status === "ended") source.push(0, { kind: "run_ended", runId: "r1", reason: "completed" });
    source.push(0, { kind: "run_status", runId: "r1", status });
    await settle();
    equal(view.status, status);
    equal(turns.children.length, 1);
    equal(turns.children[0].textContent, "Done.");
    equal(turns.children[0].getAttribute("aria-busy"), "false");
    deepStrictEqual(announcer.writes, ["Done."]);
    equal(source.closed, true);
    equal(view.toolCalls.get("c1").status, "finished");
    deepStrictEqual(view.snapshot.transcript, final.transcript);
  }
});
