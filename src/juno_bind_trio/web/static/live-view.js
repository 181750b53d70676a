// Wires the reader (turn-view.js) and the renderer (renderer.js) to a run
// served by juno_bind_trio.web: Server-Sent Events for the live stream, the
// snapshot for a resync, and the stop / cancel endpoints.
//
//   import { LiveView } from "/static/live-view.js";
//   const view = new LiveView({ turns, announcer, onChange });
//   const runId = await view.start("What is 17 + 25?");
//
// EventSource reconnects by itself and sends Last-Event-ID, so the server
// resumes the stream where it broke; the reader's seq rules absorb anything
// that arrives twice. A turn whose hold buffer overflows is resynced from the
// snapshot, which carries each live turn's text and stream position. When the
// server no longer keeps the events after Last-Event-ID (or reads the run back
// from its run store), it sends a "resync" event carrying the snapshot itself.
//
// A run that ends "suspended" lists the calls waiting for a person's decision in
// `pending` (from its "pending" event, or the snapshot); `decide({ id: true, other:
// "reason" })` approves and denies them, and returns the id of the run that goes on,
// which a new view watches (`view.watch(runId)`).

import { RunText } from "./turn-view.js";
import { TurnRenderer } from "./renderer.js";

export class LiveView {
  constructor({
    turns,
    announcer = null,
    base = "",
    document = globalThis.document,
    fetch = globalThis.fetch.bind(globalThis),
    EventSource = globalThis.EventSource,
    maxHeld,
    onChange = () => {},
  }) {
    this.base = base;
    this._fetch = fetch;
    this._EventSource = EventSource;
    this.run = new RunText(maxHeld === undefined ? {} : { maxHeld });
    this.renderer = new TurnRenderer(turns, { document, announcer });
    this.onChange = onChange;
    this.runId = null;
    this.status = "idle";
    this.reason = null;
    this.agent = null; // the agent speaking: its turns', a handoff's, the snapshot's
    this.toolCalls = new Map(); // toolCallId -> { toolName, arguments, status, content }
    this.pending = []; // calls waiting for a decision: { id, name, arguments, kind }
    this.lastEventId = 0;
    this.history = []; // every text shown: { turnId, text, seq, at }
    this._source = null;
    this._resyncing = false;
    this._ended = false;
  }

  async start(prompt) {
    const response = await this._fetch(`${this.base}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt }),
    });
    if (response.status !== 201) throw new Error(`starting the run failed: ${response.status} ${await response.text()}`);
    const { runId } = await response.json();
    this.watch(runId);
    return runId;
  }

  watch(runId) {
    this.runId = runId;
    this.status = "running";
    const source = new this._EventSource(`${this.base}/runs/${encodeURIComponent(runId)}/events`);
    this._source = source;
    source.onmessage = (message) => {
      if (message.lastEventId) this.lastEventId = Number(message.lastEventId);
      this.handle(JSON.parse(message.data));
    };
    this.onChange(this);
  }

  stop() {
    return this._control("stop");
  }

  cancel() {
    return this._control("cancel");
  }

  /** Approve (true) or deny (false, or a reason) the waiting calls; the new run's id. */
  async decide(approvals) {
    const response = await this._fetch(`${this.base}/runs/${encodeURIComponent(this.runId)}/decide`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ approvals }),
    });
    if (response.status !== 201) {
      // The server's JSON error names the call (409: settled elsewhere, or the run is held).
      const text = await response.text();
      let message = `the decision was refused: ${response.status} ${text}`;
      try {
        const body = JSON.parse(text);
        if (typeof body?.error === "string") message = body.error;
      } catch {
        // not JSON: the raw text above
      }
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    this.pending = [];
    this.onChange(this);
    const { runId } = await response.json();
    return runId;
  }

  async _control(action) {
    if (this.runId === null) return null;
    const response = await this._fetch(`${this.base}/runs/${encodeURIComponent(this.runId)}/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    return response.json();
  }

  /** Apply one event of the run's stream (already JSON-decoded). */
  handle(event) {
    switch (event.kind) {
      case "text":
      case "reset": {
        const { turnId, changed, resyncNeeded } = this.run.apply(event);
        if (changed) this._show(turnId, event.seq);
        if (resyncNeeded) this.resync();
        break;
      }
      case "turn_ended":
        if (event.agent) this.agent = event.agent;
        this.run.finalize(event.turnId, event.content ?? "");
        this._finish(event.turnId);
        break;
      case "tool_call_started":
        this.toolCalls.set(event.toolCallId, {
          toolName: event.toolName,
          arguments: event.arguments,
          status: "running",
          content: null,
        });
        break;
      case "tool_call_ended": {
        // A call answered without starting (not_run) was never announced.
        const call = this.toolCalls.get(event.toolCallId) ?? { toolName: event.toolName, arguments: event.arguments ?? null };
        this.toolCalls.set(event.toolCallId, { ...call, status: event.status, content: event.content });
        break;
      }
      case "run_status":
        this.status = event.status;
        if (event.status === "ended" || event.status === "detached") this._end();
        break;
      case "resync":
        this._restore(event.snapshot);
        break;
      case "handoff":
        this.agent = event.toAgent;
        break;
      case "run_ended":
        this.reason = event.reason;
        break;
      case "pending":
        this.pending = event.calls ?? [];
        break;
      default:
        break; // a kind this client does not know: newer server, ignore
    }
    this.onChange(this, event);
  }

  /** Bring every turn up to the server's snapshot (after a hold-buffer overflow). */
  async resync() {
    if (this._resyncing || this.runId === null) return;
    this._resyncing = true;
    try {
      const response = await this._fetch(`${this.base}/runs/${encodeURIComponent(this.runId)}`);
      this._restore(await response.json());
      this.onChange(this);
    } finally {
      this._resyncing = false;
    }
  }

  /** Bring the whole view up to a snapshot: every turn, the tool calls, the status. */
  _restore(snapshot) {
    for (const turn of snapshot.turns) {
      const before = this.run.textOf(turn.turnId);
      const wasFinal = this.run.isFinal(turn.turnId);
      this.run.restore(turn);
      if (this.run.isFinal(turn.turnId)) {
        if (!wasFinal || this.run.textOf(turn.turnId) !== before) this._finish(turn.turnId);
      } else if (this.run.textOf(turn.turnId) !== before) {
        this._show(turn.turnId, turn.lastSeq);
      }
    }
    for (const call of snapshot.toolCalls ?? []) {
      this.toolCalls.set(call.toolCallId, {
        toolName: call.toolName,
        arguments: call.arguments ?? null,
        status: call.status,
        content: call.content ?? null,
      });
    }
    if (snapshot.agent) this.agent = snapshot.agent;
    if (snapshot.reason) this.reason = snapshot.reason;
    if (snapshot.pending) this.pending = snapshot.pending;
    this.status = snapshot.status;
    this.snapshot = snapshot;
    if (snapshot.status === "ended" || snapshot.status === "detached") this._end();
  }

  _show(turnId, seq) {
    const text = this.run.textOf(turnId);
    this.renderer.update(turnId, text);
    this.history.push({ turnId, text, seq, at: performance.timeOrigin + performance.now() });
  }

  _finish(turnId) {
    const text = this.run.textOf(turnId);
    this.renderer.finish(turnId, text);
    this.history.push({ turnId, text, seq: null, at: performance.timeOrigin + performance.now() });
  }

  async _end() {
    if (this._ended) return;
    this._ended = true;
    if (this._source !== null) this._source.close();
    this._source = null;
    for (const turnId of this.run.turnIds) {
      if (!this.run.isFinal(turnId)) {
        this.run.finalize(turnId);
        this._finish(turnId);
      }
    }
    // The final record: the transcript with every tool call answered.
    const response = await this._fetch(`${this.base}/runs/${encodeURIComponent(this.runId)}`);
    this.snapshot = await response.json();
    for (const call of this.snapshot.toolCalls ?? []) {
      const mine = this.toolCalls.get(call.toolCallId);
      if (mine !== undefined && mine.arguments === null) mine.arguments = call.arguments ?? null;
    }
    this.onChange(this);
  }
}
