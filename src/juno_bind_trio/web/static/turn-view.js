// The reader's side of the turn text protocol, as a plain ES module.
//
// Events arrive over a transport that may reorder, duplicate or drop them (an
// SSE stream that reconnects, a relay, several tabs). Three rules make the text
// on screen converge anyway:
//
//   1. Scope everything to the turn: `epoch` and `seq` restart every turn.
//   2. Apply in `seq` order: drop what is at or below the last seq applied,
//      hold what arrives ahead of it until the gap fills.
//   3. Then by `epoch`: drop an event older than the newest epoch applied,
//      clear the text on a reset.
//
// The hold buffer is bounded: when it overflows the turn stops applying events
// and asks to be resynced from the snapshot (the persisted message). When the
// host signals that a turn is over, its state is dropped; only the final text
// remains, and any late event for that turn is ignored.
//
// This module agrees event for event with the Python `TurnTextView`
// (juno_bind_trio.completion); the tests run the same scenarios through both.

/** How many early events one turn holds before it asks for a resync. */
export const DEFAULT_MAX_HELD = 256;

const RESET_REASONS = new Set(["attempt_failed", "structured_output_retry", "guardrail"]);

function isCounter(value) {
  return Number.isSafeInteger(value) && value >= 0;
}

/**
 * Check one wire object; throw a TypeError that names the bad field.
 * Returns the event unchanged.
 */
export function checkEvent(event, where = "checkEvent") {
  if (event === null || typeof event !== "object") {
    throw new TypeError(`${where}: expected a turn stream event object, got ${String(event)}`);
  }
  const { kind } = event;
  if (kind !== "text" && kind !== "reset") {
    throw new TypeError(`${where}: 'kind' must be 'text' or 'reset', got ${JSON.stringify(kind)}`);
  }
  if (typeof event.turnId !== "string" || event.turnId === "") {
    throw new TypeError(`${where}: 'turnId' must be a non-empty string, got ${JSON.stringify(event.turnId)}`);
  }
  for (const key of ["epoch", "seq"]) {
    if (!isCounter(event[key])) {
      throw new TypeError(`${where}: '${key}' must be a non-negative integer, got ${JSON.stringify(event[key])}`);
    }
  }
  if (kind === "text" && typeof event.text !== "string") {
    throw new TypeError(`${where}: 'text' must be a string, got ${JSON.stringify(event.text)}`);
  }
  if (kind === "reset" && !RESET_REASONS.has(event.reason)) {
    throw new TypeError(`${where}: 'reason' must be one of attempt_failed, structured_output_retry, guardrail, got ${JSON.stringify(event.reason)}`);
  }
  return event;
}

function checkMaxHeld(maxHeld, where) {
  if (!Number.isSafeInteger(maxHeld) || maxHeld < 1) {
    throw new TypeError(`${where}: maxHeld must be a positive integer, got ${String(maxHeld)}`);
  }
  return maxHeld;
}

/**
 * One turn's text, reassembled from events delivered in any order, any number
 * of times. Mirrors the Python `TurnTextView`.
 */
export class TurnText {
  constructor(turnId, { maxHeld = DEFAULT_MAX_HELD } = {}) {
    if (typeof turnId !== "string" || turnId === "") {
      throw new TypeError(`TurnText: turnId must be a non-empty string, got ${JSON.stringify(turnId)}`);
    }
    this.turnId = turnId;
    this.maxHeld = checkMaxHeld(maxHeld, "TurnText");
    // lastSeq starts at -1: seq starts at 0, and seeding it with 0 would drop
    // the first delta of every turn.
    this.lastSeq = -1;
    this.epoch = -1;
    this.text = "";
    this.resyncNeeded = false;
    this.final = false;
    this._held = new Map();
  }

  /** How many early events wait for a gap in seq to fill. */
  get held() {
    return this._held.size;
  }

  /**
   * Take one delivered event. Returns whether `text` may have changed. Events
   * for another turn, duplicates, replays and stale epochs are dropped; an
   * early event is held until its gap fills. Nothing applies after
   * `finalize()` or while a resync is needed.
   */
  apply(event) {
    checkEvent(event, "TurnText.apply");
    if (this.final || this.resyncNeeded || event.turnId !== this.turnId) return false;
    const { seq } = event;
    if (seq <= this.lastSeq) return false; // a replay or a duplicate
    if (seq > this.lastSeq + 1) {
      this._held.set(seq, event);
      if (this._held.size > this.maxHeld) {
        // The gap will likely never fill; holding on would freeze the surface
        // on what it shows, possibly a retracted attempt. Ask for a resync.
        this._held.clear();
        this.resyncNeeded = true;
      }
      return false;
    }
    this._applyInOrder(event);
    let next = this.lastSeq + 1;
    while (this._held.has(next)) {
      const early = this._held.get(next);
      this._held.delete(next);
      this._applyInOrder(early);
      next = this.lastSeq + 1;
    }
    return true;
  }

  /**
   * The turn is over: drop held events and ignore whatever follows. A string
   * makes the persisted text authoritative; undefined/null keeps what shows.
   */
  finalize(text) {
    if (text !== undefined && text !== null) {
      if (typeof text !== "string") {
        throw new TypeError(`TurnText.finalize: text must be a string or null, got ${String(text)}`);
      }
      this.text = text;
    }
    this._held.clear();
    this.final = true;
  }

  /**
   * Continue from a snapshot of the turn taken mid-stream (`text`, `epoch`,
   * `lastSeq` as the server's own view has them): held events are dropped,
   * the resync flag clears, and events after `lastSeq` apply as usual.
   */
  restore({ text, epoch, lastSeq }) {
    if (typeof text !== "string") {
      throw new TypeError(`TurnText.restore: text must be a string, got ${String(text)}`);
    }
    if (!Number.isSafeInteger(epoch) || epoch < -1 || !Number.isSafeInteger(lastSeq) || lastSeq < -1) {
      throw new TypeError(`TurnText.restore: epoch and lastSeq must be integers >= -1, got ${String(epoch)}, ${String(lastSeq)}`);
    }
    if (this.final) return;
    this._held.clear();
    this.resyncNeeded = false;
    if (lastSeq < this.lastSeq) return; // the view is already further along
    this.text = text;
    this.epoch = epoch;
    this.lastSeq = lastSeq;
  }

  /** Re-render from the persisted message after an overflow, and end the turn. */
  resync(text) {
    if (typeof text !== "string") {
      throw new TypeError(`TurnText.resync: text must be a string, got ${String(text)}`);
    }
    this.resyncNeeded = false;
    this.finalize(text);
  }

  _applyInOrder(event) {
    this.lastSeq = event.seq;
    if (event.epoch < this.epoch) return; // a stale attempt's tail
    this.epoch = event.epoch;
    if (event.kind === "reset") this.text = "";
    else this.text += event.text;
  }
}

/**
 * Every turn of one run (or one conversation): a `TurnText` per live turn,
 * created on the turn's first event, and only the final text once the host
 * says the turn is over (its seq/epoch state and hold buffer are dropped).
 */
export class RunText {
  constructor({ maxHeld = DEFAULT_MAX_HELD } = {}) {
    this.maxHeld = checkMaxHeld(maxHeld, "RunText");
    this._live = new Map(); // turnId -> TurnText
    this._done = new Map(); // turnId -> final text
    this._order = []; // turnIds in first-seen order
  }

  /** Turn ids in the order they were first seen. */
  get turnIds() {
    return [...this._order];
  }

  /** The text a reader should see for a turn ("" for an unknown one). */
  textOf(turnId) {
    if (this._done.has(turnId)) return this._done.get(turnId);
    const live = this._live.get(turnId);
    return live === undefined ? "" : live.text;
  }

  /** Whether the turn has ended (its state dropped). */
  isFinal(turnId) {
    return this._done.has(turnId);
  }

  /** Whether the turn's hold buffer overflowed and it waits for `resync`. */
  needsResync(turnId) {
    const live = this._live.get(turnId);
    return live !== undefined && live.resyncNeeded;
  }

  /** The live turn state, for inspection (undefined once final). */
  liveTurn(turnId) {
    return this._live.get(turnId);
  }

  _touch(turnId) {
    let live = this._live.get(turnId);
    if (live === undefined) {
      live = new TurnText(turnId, { maxHeld: this.maxHeld });
      this._live.set(turnId, live);
      this._order.push(turnId);
    }
    return live;
  }

  /**
   * Apply one wire event. Returns `{ turnId, changed, resyncNeeded }`; a late
   * event for a turn that already ended changes nothing.
   */
  apply(event) {
    checkEvent(event, "RunText.apply");
    const { turnId } = event;
    if (this._done.has(turnId)) return { turnId, changed: false, resyncNeeded: false };
    const live = this._touch(turnId);
    const changed = live.apply(event);
    return { turnId, changed, resyncNeeded: live.resyncNeeded };
  }

  /**
   * The turn-final signal: keep `text` (or, when it is null/undefined, what the
   * turn shows) and drop the turn's state entirely. On a turn already over, a
   * string still replaces the text: the persisted message is authoritative.
   */
  finalize(turnId, text) {
    if (typeof turnId !== "string" || turnId === "") {
      throw new TypeError(`RunText.finalize: turnId must be a non-empty string, got ${JSON.stringify(turnId)}`);
    }
    if (this._done.has(turnId)) {
      // Already over: only a persisted text can still replace what shows.
      if (text !== undefined && text !== null) {
        new TurnText(turnId).finalize(text); // the same check as a live turn's
        this._done.set(turnId, text);
      }
      return;
    }
    const live = this._touch(turnId);
    live.finalize(text);
    this._live.delete(turnId);
    this._done.set(turnId, live.text);
  }

  /**
   * Bring one turn up to a snapshot of it: `{ turnId, text, epoch, lastSeq,
   * final }`. A final turn ends with the snapshot's text; a live one continues
   * from the snapshot's position.
   */
  restore(turn) {
    if (turn === null || typeof turn !== "object") {
      throw new TypeError(`RunText.restore: expected a turn snapshot object, got ${String(turn)}`);
    }
    if (turn.final) {
      this.finalize(turn.turnId, turn.text);
      return;
    }
    if (this._done.has(turn.turnId)) return;
    this._touch(turn.turnId).restore(turn);
  }

  /** Resync one turn from the persisted message's text, which also ends it. */
  resync(turnId, text) {
    if (typeof text !== "string") {
      throw new TypeError(`RunText.resync: text must be a string, got ${String(text)}`);
    }
    this.finalize(turnId, text);
  }
}
