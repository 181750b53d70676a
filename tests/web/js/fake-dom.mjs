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

// A document with a layout: every element has 4px of padding above and below
// and a 1px border, in the content-box model, so its offsetHeight is its
// content height plus 10px and its computed height is the content height.
export class PaddedElement extends FakeElement {
  get contentHeight() { return this._text === "" ? 0 : 20 * Math.ceil(this._text.length / 10); }
  get offsetHeight() { return this.contentHeight + 10; }
  // What the browser lays out: the content, or the min-height if it is taller.
  get laidOutHeight() {
    const held = this.style.minHeight === "" ? 0 : parseFloat(this.style.minHeight);
    return Math.max(this.contentHeight, held) + 10;
  }
}

export const paddedDocument = {
  createElement: (tag) => new PaddedElement(tag),
  defaultView: {
    getComputedStyle: (element) => ({
      height: `${Math.max(element.contentHeight, parseFloat(element.style.minHeight) || 0)}px`,
    }),
  },
};
