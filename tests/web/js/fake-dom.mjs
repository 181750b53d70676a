// Just enough DOM for the renderer: elements with attributes, text, style, height.
export class FakeElement {
  constructor(tag) {
    this.tag = tag;
    this.attributes = new Map();
    this.children = [];
    this.style = { minHeight: "" };
    this._text = "";
    this.writes = [];
  }
  setAttribute(name, value) { this.attributes.set(name, String(value)); }
  getAttribute(name) { return this.attributes.get(name) ?? null; }
  appendChild(child) { this.children.push(child); return child; }
  get textContent() { return this._text; }
  set textContent(value) { this._text = value; this.writes.push(value); }
  // One 20px line per 10 characters.
  get offsetHeight() { return this._text === "" ? 0 : 20 * Math.ceil(this._text.length / 10); }
}

export const fakeDocument = { createElement: (tag) => new FakeElement(tag) };
