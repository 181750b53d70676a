// A small renderer for the turns of a run, following the protocol's advice for
// a screen:
//
// * one element per turn, keyed by turnId (never by epoch: a reset is a
//   content update, not a new element, so focus, selection and scroll stay);
// * aria-busy="true" while the turn streams, and one announcement at the end
//   through a separate polite live region, instead of re-announcing the whole
//   answer on every wipe;
// * a reset never collapses the element's height mid-stream: the height it had
//   is kept as a min-height until the turn ends, so an auto-scrolled
//   transcript does not lurch. The height held is the computed `height`,
//   which is measured in the same box `min-height` applies to (the content
//   box, or the border box under `box-sizing: border-box`); offsetHeight
//   counts padding and borders too, and holding it would grow the box by
//   exactly those at every reset.
//
// It needs only createElement, appendChild, setAttribute, textContent, style,
// offsetHeight and (where there is one) defaultView.getComputedStyle from the
// DOM, so it runs against a tiny fake in node tests.

export class TurnRenderer {
  /**
   * @param container the element the turn elements are appended to
   * @param options.document the document to create elements with
   * @param options.announcer an element with aria-live="polite" (optional)
   */
  constructor(container, { document = globalThis.document, announcer = null } = {}) {
    if (container === null || typeof container !== "object") {
      throw new TypeError(`TurnRenderer: container must be an element, got ${String(container)}`);
    }
    this.container = container;
    this.document = document;
    this.announcer = announcer;
    this._elements = new Map(); // turnId -> element
    this._shown = new Map(); // turnId -> text last written
    this._announced = new Set();
  }

  /** The element showing a turn, or undefined. */
  elementFor(turnId) {
    return this._elements.get(turnId);
  }

  _element(turnId) {
    let element = this._elements.get(turnId);
    if (element === undefined) {
      element = this.document.createElement("div");
      element.setAttribute("class", "turn");
      element.setAttribute("data-turn-id", turnId);
      element.setAttribute("aria-busy", "true");
      this.container.appendChild(element);
      this._elements.set(turnId, element);
      this._shown.set(turnId, "");
    }
    return element;
  }

  /** Show a turn's current text while it streams. */
  update(turnId, text) {
    const element = this._element(turnId);
    const before = this._shown.get(turnId);
    if (before === text) return;
    if (!text.startsWith(before)) {
      // A retraction: hold the height the element had so the page does not
      // jump; the min-height is released when the turn ends.
      const held = this._heldHeight(element);
      if (held !== null) element.style.minHeight = held;
    }
    element.textContent = text;
    this._shown.set(turnId, text);
  }

  /**
   * The min-height that keeps the element exactly as tall as it is now, or null.
   *
   * The computed height is in the box min-height applies to, so the two agree
   * whatever the page's padding, borders and box-sizing; it keeps fractions
   * of a pixel, which offsetHeight rounds away. Without a layout engine (or for
   * an element that is not rendered, whose height computes to "auto") the
   * element's offsetHeight is the best there is.
   */
  _heldHeight(element) {
    const view = this.document?.defaultView;
    if (view && typeof view.getComputedStyle === "function") {
      const height = view.getComputedStyle(element).height;
      if (typeof height === "string" && height.endsWith("px") && parseFloat(height) > 0) {
        return height;
      }
    }
    const offset = element.offsetHeight;
    return typeof offset === "number" && offset > 0 ? `${offset}px` : null;
  }

  /** The turn is over: final text, not busy any more, announced once. */
  finish(turnId, text) {
    const element = this._element(turnId);
    if (typeof text === "string" && this._shown.get(turnId) !== text) {
      element.textContent = text;
      this._shown.set(turnId, text);
    }
    element.style.minHeight = "";
    element.setAttribute("aria-busy", "false");
    if (!this._announced.has(turnId)) {
      this._announced.add(turnId);
      const shown = this._shown.get(turnId);
      if (this.announcer !== null && shown !== "") this.announcer.textContent = shown;
    }
  }
}
